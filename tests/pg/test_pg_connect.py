"""How a kernel connects to the team store (``mibyan_jupyter.store.pg.connect``), against the
real server: the roles that would bypass row-level security are refused, credentials come
only from the environment or a passfile and are never shown, and the pool is small enough
for 20 kernels within PostgreSQL's default ``max_connections``.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
from pg_server import PgTestDb, PgUser

from mibyan_jupyter.store.files import StoreError
from mibyan_jupyter.store.pg.connect import (
    POOL_MAX,
    PgDatabase,
    database_url,
    parse_url,
)
from mibyan_jupyter.store.pg.scrub import scrub


def _open_as(db: PgTestDb, user: PgUser, monkeypatch: pytest.MonkeyPatch) -> PgDatabase:
    monkeypatch.setenv("PGPASSWORD", user.password)
    return PgDatabase(db.url(user.name))


def _refusal(db: PgTestDb, url: str) -> str:
    with pytest.raises(StoreError) as refused:
        PgDatabase(url)
    error = refused.value
    assert error.__cause__ is None
    assert error.__context__ is None
    return str(error)


def test_a_student_connects_and_writes_in_their_own_transaction(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = pg_db.user("alice")
    with _open_as(pg_db, alice, monkeypatch) as store:
        with store.transaction() as conn:
            conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 1, 1)")
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
            assert conn.execute("SHOW search_path").fetchone() == ("mibyan, pg_catalog",)

        def fails_halfway() -> None:
            with store.transaction() as conn:
                conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('t', 1, 1)")
                conn.execute("UPDATE sessions SET status = 'bogus' WHERE id = 't'")

        with pytest.raises(StoreError, match="violates check constraint") as failed:
            fails_halfway()
        assert failed.value.kind == "other"  # a wrong row does not pass by waiting
        with store.transaction() as conn:  # the failed transaction left nothing
            rows = conn.execute("SELECT id, user_name FROM sessions").fetchall()
    assert rows == [("s", alice.name)]


@pytest.mark.parametrize(
    ("clauses", "why"),
    [
        ("LOGIN SUPERUSER", "is a superuser"),
        ("LOGIN BYPASSRLS IN ROLE mibyan_app", "has BYPASSRLS"),
        ("LOGIN IN ROLE mibyan_app, mibyan_owner", "member of mibyan_owner"),
        ("LOGIN IN ROLE mibyan_app, mibyan_admin", "member of mibyan_admin"),
        ("LOGIN", "is not a mibyan user"),
    ],
)
def test_roles_that_would_bypass_row_security_are_refused(
    pg_db: PgTestDb, clauses: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    role = pg_db.make_role("r", f"{clauses} PASSWORD 'pw-for-refusal'")
    monkeypatch.setenv("PGPASSWORD", "pw-for-refusal")
    message = _refusal(pg_db, pg_db.url(role))
    assert why in message
    assert "\n" not in message
    assert "pw-for-refusal" not in message


def test_the_bootstrap_superuser_is_refused(pg_db: PgTestDb) -> None:
    assert "is a superuser" in _refusal(pg_db, pg_db.url("mibyan"))


def test_a_table_owned_by_the_role_is_refused(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = pg_db.user("alice")
    pg_db.admin().execute(f"ALTER TABLE mibyan.audit OWNER TO {alice.name}")
    monkeypatch.setenv("PGPASSWORD", alice.password)
    assert "which owns the tables" in _refusal(pg_db, pg_db.url(alice.name))


def test_a_url_with_a_password_is_refused_and_never_echoed(pg_db: PgTestDb) -> None:
    secret = "Hunter2-secret"
    base = pg_db.url("someone")
    for url in (
        f"{base}&password={secret}",
        f"postgresql://someone:{secret}@localhost/db",
        f"host=/tmp dbname=x user=someone password={secret}",
    ):
        with pytest.raises(StoreError) as refused:
            parse_url(url)
        message = str(refused.value)
        assert "holds a password" in message
        assert "PGPASSWORD" in message
        assert "~/.pgpass" in message
        assert "PGSERVICE" in message
        assert secret not in message
        assert secret not in "".join(traceback.format_exception(refused.value))


def test_a_url_that_does_not_parse_is_not_repeated() -> None:
    with pytest.raises(StoreError) as refused:
        parse_url("host=x password='unterminated-Hunter2")
    assert "Hunter2" not in str(refused.value)
    assert "not shown" in str(refused.value)


def test_a_wrong_password_fails_in_one_line_without_the_password(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = pg_db.user("alice")
    monkeypatch.setenv("PGPASSWORD", "Wrong-Hunter2")
    message = _refusal(pg_db, pg_db.url(alice.name))
    assert "password authentication failed" in message
    assert alice.name in message
    assert "Wrong-Hunter2" not in message
    assert "\n" not in message


def test_a_passfile_gives_the_password(
    pg_db: PgTestDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = pg_db.user("alice")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:{pg_db.name}:{alice.name}:{alice.password}\n")
    passfile.chmod(0o600)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with PgDatabase(pg_db.url(alice.name)) as store, store.transaction() as conn:
        assert conn.execute("SELECT current_user").fetchone() == (alice.name,)


def test_scrub_takes_out_every_form_of_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "env-Secret")
    text = scrub(
        "password=abc postgresql://u:def@h/db ?host=x&password=ghi PASSWORD = 'j k' and env-Secret"
    )
    for secret in ("abc", "def", "ghi", "j k", "env-Secret"):
        assert secret not in text
    assert "postgresql://u:***@h/db" in text


def test_the_url_comes_from_the_setting_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MIBYAN_DB_URL", raising=False)
    assert database_url("") is None
    monkeypatch.setenv("MIBYAN_DB_URL", "postgresql:///from-env")
    assert database_url("") == "postgresql:///from-env"
    assert database_url("postgresql:///configured") == "postgresql:///configured"


def test_an_unmigrated_database_says_to_run_migrate(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = pg_db.user("alice")
    admin = pg_db.admin()
    admin.execute(f"CREATE DATABASE empty_{pg_db.suffix}")
    admin.execute(f"GRANT CONNECT ON DATABASE empty_{pg_db.suffix} TO {alice.name}")
    monkeypatch.setenv("PGPASSWORD", alice.password)
    try:
        message = _refusal(pg_db, pg_db.cluster.url(f"empty_{pg_db.suffix}", alice.name))
    finally:
        admin.execute(f"DROP DATABASE empty_{pg_db.suffix}")
    assert "mibyan-admin pg migrate" in message


def test_twenty_kernels_fit_in_the_default_max_connections(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each kernel's pool opens 1 connection and grows to at most 3 under load: 20 such
    kernels hold 60 of the 100 (3 reserved for superusers), all at once."""
    alice = pg_db.user("alice")
    monkeypatch.setenv("PGPASSWORD", alice.password)
    stores = [PgDatabase(pg_db.url(alice.name)) for _ in range(20)]
    try:
        held = [store.pool.getconn() for store in stores for _ in range(POOL_MAX)]
        count = pg_db.admin().execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (alice.name,)
        )
        assert count.fetchone() == (20 * POOL_MAX,)
        (limit,) = pg_db.admin().execute("SHOW max_connections").fetchone()
        assert int(limit) == 100
        for store, conn in zip([s for s in stores for _ in range(POOL_MAX)], held, strict=True):
            store.pool.putconn(conn)
        assert all(store.pool.get_stats()["pool_max"] == POOL_MAX for store in stores)
    finally:
        for store in stores:
            store.close()


def test_a_service_file_names_the_server_and_a_passfile_the_password(
    pg_db: PgTestDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = pg_db.user("alice")
    services = tmp_path / "pg_service.conf"
    services.write_text(
        f"[classroom]\nhost={pg_db.cluster.socket_dir}\ndbname={pg_db.name}\nuser={alice.name}\n"
    )
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:*:{alice.name}:{alice.password}\n")
    passfile.chmod(0o600)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with PgDatabase("service=classroom") as store, store.transaction() as conn:
        assert conn.execute("SELECT current_user").fetchone() == (alice.name,)


def test_the_pools_log_records_are_scrubbed(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    monkeypatch.setenv("PGPASSWORD", "Env-Hunter2")
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        logging.getLogger("psycopg.pool").warning(
            "error connecting in %r: %s", "pool", "failed for password=Url-Hunter2 Env-Hunter2"
        )
    assert "Hunter2" not in caplog.text
    assert "password=***" in caplog.text


WRITER = """
import os, sys
from mibyan_jupyter.store.pg.connect import PgDatabase
with PgDatabase(sys.argv[1]) as store:
    with store.transaction() as conn:
        conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('k', 1, 1)")
    for seq in range(100000):
        with store.transaction() as conn:
            conn.execute(
                "INSERT INTO messages (session_id, seq, role, data, created_at)"
                " VALUES ('k', ?, 'user', '{}', 1)", (seq,))
        print(seq, flush=True)
"""


@pytest.mark.slow
def test_a_killed_kernel_loses_no_committed_message(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each message is committed in its own transaction: a process killed with SIGKILL
    mid-stream keeps every message whose commit returned, with no gap."""
    import signal
    import subprocess
    import sys

    alice = pg_db.user("alice")
    monkeypatch.setenv("PGPASSWORD", alice.password)
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, pg_db.url(alice.name)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        for _ in range(200):
            last = int(child.stdout.readline())
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    (count, top) = (
        pg_db.admin()
        .execute("SELECT count(*), max(seq) FROM mibyan.messages WHERE session_id = 'k'")
        .fetchone()
    )
    assert top >= last  # every message whose commit had returned (it wrote on meanwhile)
    assert count == top + 1  # and no gap: each commit whole or not at all

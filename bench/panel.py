"""The sessions API as the panel uses it, through a real jupyter server over loopback.

A store of 10,000 sessions holding 100,000 messages (10 each: prompts, replies with tool
calls, tool results) is written in bulk through the store's own columns and indexed for
full-text search first (search catches up on what is not indexed yet; a panel's first
search after a big import would pay that once). Then ``jupyter server`` (the extension
enabled by the repository's ``jupyter-config`` file, every other server extension off)
serves it, and each request is timed from the client, HTTP included, median of ``--runs``:

* list_10k: ``GET /mibyan/api/sessions?limit=50`` (the panel's first page), and the last
  page (``offset=9950``);
* search_100k: ``GET /mibyan/api/sessions?q=dataframe&limit=20`` (a word in 1 message of
  12, so ~8,000 matches ranked) and a rare word (one match);
* one session's messages page, its transcript, its ipynb export;
* the server extension's import (what a server start pays for it).

Goals (issue 12): list_10k_ms <= 100, search_100k_ms <= 100. The last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.store.db import Database
from mibyan_jupyter.store.records import encode_message, message_text
from mibyan_jupyter.store.search import catch_up

REPO = Path(__file__).resolve().parents[1]
WORDS = ["notebook", "kernel", "dataframe", "plot", "agent", "tool", "session", "export"]
WORDS += ["search", "resume", "budget", "cell"]
OTHER_EXTENSIONS = ("jupyterlab", "notebook", "notebook_shim", "jupyter_lsp")
OTHER_EXTENSIONS += ("jupyter_server_terminals",)


def session_messages(n: int, i: int) -> list[Message]:
    """``n`` messages of session number ``i``: the pattern of a tool-using conversation."""
    out: list[Message] = []
    k = 0
    while len(out) < n:
        word = WORDS[(i + k) % len(WORDS)]
        call = ToolCall(
            id=f"c{k}", function=FunctionCall(name="run_python", arguments=f'{{"code": "df{k}"}}')
        )
        out += [
            UserMessage(content=f"Please look at the {word} number {i}.{k} and summarise it."),
            AssistantMessage(content=f"Checking the {word}.", tool_calls=(call,)),
            ToolMessage(tool_call_id=call.id, name="run_python", content=f"count 100\nmean {k}.5"),
            AssistantMessage(content=f"The {word} {i} has a mean of {k}.5; nothing unusual."),
        ]
        k += 1
    return out[:n]


def build(path: Path, sessions: int, per_session: int) -> str:
    """Write the store in bulk; returns one session's id (with a rare word in it)."""
    db = Database(path)
    now = time.time()
    rare = ""
    with db.transaction() as conn:
        for i in range(sessions):
            sid = uuid.uuid4().hex
            rare = rare or sid
            conn.execute(
                "INSERT INTO sessions (id, title, model, notebook_path, config, created_at,"
                " updated_at) VALUES (?, ?, 'demo:scripted', ?, '{}', ?, ?)",
                (sid, f"Session {i}", f"work/nb{i % 50}.ipynb", now - i, now - i),
            )
            messages = session_messages(per_session, i)
            if sid == rare:
                messages[0] = UserMessage(content="the axolotl appears exactly once")
            conn.executemany(
                "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (sid, seq, m.role, message_text(m), encode_message(m), now)
                    for seq, m in enumerate(messages)
                ],
            )
    catch_up(db)
    db.close()
    return rare


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(base: Path, db: Path, token: str, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for name in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        (base / name).mkdir()
        env[name] = str(base / name)
    env["JUPYTER_CONFIG_PATH"] = str(REPO / "jupyter-config")
    env["MIBYAN_DB"] = str(db)
    off = [f"--ServerApp.jpserver_extensions={name}=False" for name in OTHER_EXTENSIONS]
    command = [str(Path(sys.executable).parent / "jupyter"), "server", "--no-browser"]
    command += ["--allow-root", "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0"]
    command += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={base}", *off]
    log = (base / "server.log").open("wb")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(client: httpx.Client, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("jupyter server exited early")
        try:
            if client.get("/api/status").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError("jupyter server did not answer")


def timed(
    client: httpx.Client, url: str, runs: int, check: Callable[[httpx.Response], bool]
) -> float:
    """Median milliseconds of ``GET url`` (after one warm-up), every reply checked."""
    times = []
    for index in range(runs + 1):
        start = time.perf_counter()
        reply = client.get(url)
        elapsed = (time.perf_counter() - start) * 1000
        if reply.status_code != 200 or not check(reply):
            raise RuntimeError(f"GET {url}: {reply.status_code} {reply.text[:200]}")
        if index:
            times.append(elapsed)
    return round(statistics.median(times), 2)


def import_ms() -> float:
    """Milliseconds to import the extension's module in a fresh interpreter (best of 3)."""
    code = "import time; s = time.perf_counter(); import jupyter_server.base.handlers; m = time.perf_counter(); import mibyan_jupyter.server.extension; print((time.perf_counter() - m) * 1000)"
    runs = [
        float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(3)
    ]
    return round(min(runs), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    figures: dict[str, float | int] = {}
    with tempfile.TemporaryDirectory(prefix="mibyan-bench-panel-") as folder:
        base = Path(folder)
        db = base / "sessions.sqlite3"
        started = time.perf_counter()
        one = build(db, args.sessions, args.per_session)
        figures["build_s"] = round(time.perf_counter() - started, 1)
        token, port = secrets.token_hex(16), free_port()
        proc = start_server(base, db, token, port)
        headers = {"Authorization": f"token {token}"}
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as client:
                wait_ready(client, proc)
                figures.update(measure(client, one, args))
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    figures["sessions"] = args.sessions
    figures["messages"] = args.sessions * args.per_session
    figures["extension_import_ms"] = import_ms()
    for key, value in figures.items():
        print(f"{key:>24}: {value}")
    print(json.dumps(figures))


def measure(client: httpx.Client, one: str, args: argparse.Namespace) -> dict[str, float | int]:
    api = "/mibyan/api/sessions"
    total = args.sessions
    last = max(0, total - 50)

    def listed(reply: httpx.Response) -> bool:
        body = reply.json()
        return body["total"] == total and len(body["sessions"]) == min(50, total)

    def hits(count: int) -> Callable[[httpx.Response], bool]:
        return lambda reply: len(reply.json()["hits"]) == count

    runs = args.runs
    return {
        "list_10k_ms": timed(client, f"{api}?limit=50", runs, listed),
        "list_10k_last_page_ms": timed(
            client, f"{api}?limit=50&offset={last}", runs, lambda r: True
        ),
        "search_100k_ms": timed(client, f"{api}?q=dataframe&limit=20", runs, hits(20)),
        "search_100k_rare_ms": timed(client, f"{api}?q=axolotl&limit=20", runs, hits(1)),
        "messages_page_ms": timed(client, f"{api}/{one}/messages?limit=100", runs, lambda r: True),
        "transcript_ms": timed(client, f"{api}/{one}/transcript", runs, lambda r: True),
        "export_ipynb_ms": timed(client, f"{api}/{one}/export?format=ipynb", runs, lambda r: True),
    }


if __name__ == "__main__":
    main()

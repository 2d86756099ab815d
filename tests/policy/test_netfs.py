"""A session database on a network file system is found by the mount table and said once,
with the way to the PostgreSQL store (the fake mount table is the function's own input)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mibyan_jupyter.store.netfs import (
    NetworkFilesystemWarning,
    filesystem_type,
    network_filesystem,
    warn_if_network,
)

MOUNTS = """\
/dev/sda1 / ext4 rw,relatime 0 0
nfs.hub:/home /home nfs4 rw,vers=4.2 0 0
//files/share /mnt/my\\040share cifs rw 0 0
tmpfs /home/alice/.cache tmpfs rw 0 0
"""


def test_the_longest_mount_point_above_the_file_decides() -> None:
    assert filesystem_type(Path("/home/alice/db.sqlite3"), MOUNTS) == "nfs4"
    assert filesystem_type(Path("/home/alice/.cache/db.sqlite3"), MOUNTS) == "tmpfs"
    assert filesystem_type(Path("/mnt/my share/db.sqlite3"), MOUNTS) == "cifs"
    assert filesystem_type(Path("/homework/db.sqlite3"), MOUNTS) == "ext4"  # not /home


def test_a_network_database_is_said_once_with_the_way_out() -> None:
    path = Path("/home/bob/.local/share/jupyter/mibyan/sessions.sqlite3")
    with pytest.warns(NetworkFilesystemWarning) as caught:
        text = warn_if_network(path, mounts=MOUNTS)
    assert text is not None
    assert "network file system (nfs4)" in text
    assert "PostgreSQL" in text
    assert "MIBYAN_DB_URL" in text
    assert len(caught) == 1
    assert warn_if_network(path, mounts=MOUNTS) is None  # once per file and process


def test_a_local_database_says_nothing(tmp_path: Path) -> None:
    assert warn_if_network(Path("/var/lib/db.sqlite3"), mounts=MOUNTS) is None
    assert network_filesystem(tmp_path) is None  # this machine's own disk

"""The parent-death guard of stdio MCP servers (docs/architecture.md, "Tools from outside").

Why: the SDK starts a stdio server in a new session (``start_new_session=True``), outside the
kernel's process group, so that it can end the server's whole tree with ``killpg``. The
price: when the kernel is killed with SIGKILL (a crashed or OOM-killed kernel, "Restart" of
a hung one), no one ends the server, and a server that does not notice its stdin closing
(one blocked in a tool call, or one whose own children hold the pipe) lives on.

How: the command is wrapped in :mod:`.watchdog`, a tiny Python process that starts the
server in its own group and ends that group when the kernel dies. Chosen over the
alternatives because it covers what they miss: ``PR_SET_PDEATHSIG`` on the server itself
would need a hook between fork and exec (the SDK offers none), is Linux-only, and kills
only the server, not a launcher's children (``npx`` -> ``node``); watching stdin for EOF
fails for a server blocked in a call. The watchdog uses ``PR_SET_PDEATHSIG`` on itself
where it exists (Linux: no lag) and polls its parent pid everywhere (POSIX: at most
``POLL_S`` late). It costs one small Python process per server (~10 MB, ~30 ms to start).
On Windows the SDK puts the server in a Job Object that already dies with the kernel, so
the command is left as it is.

:func:`read_pids` gives the hub the watchdog's pid (its group id) and the server's, for
``%agent mcp list`` and for :func:`kill_group` (a hung server is killed at once, not
asked to exit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

WATCHDOG = Path(__file__).resolve().with_name("watchdog.py")
"""Run by path, so starting it imports nothing of the package."""


def guarded(command: str, args: tuple[str, ...], pidfile: Path) -> tuple[str, list[str]]:
    """The command and arguments that start ``command args`` under the watchdog."""
    if sys.platform == "win32":
        return command, list(args)
    wrapped = [str(WATCHDOG), str(os.getpid()), str(pidfile), "--", command, *args]
    return sys.executable, wrapped


def read_pids(pidfile: Path) -> tuple[int, int] | None:
    """``(watchdog pid, server pid)`` once the watchdog wrote them, else ``None``."""
    try:
        first, second = pidfile.read_text().split()
        return int(first), int(second)
    except (OSError, ValueError):
        return None


def kill_group(pidfile: Path) -> None:
    """SIGKILL the watchdog's process group (the server and whatever it started)."""
    pids = read_pids(pidfile)
    if pids is None or sys.platform == "win32":
        return
    with contextlib.suppress(OSError):
        os.killpg(pids[0], signal.SIGKILL)


def exists(pid: int) -> bool:
    """Whether a process with this pid exists (one system call; a zombie counts)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True

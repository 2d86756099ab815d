"""The parent-death watchdog a stdio MCP server runs under (see :mod:`.guard` for why).

Run as a script, by path, so it imports nothing of the package::

    python watchdog.py KERNEL_PID PIDFILE -- COMMAND ARGS...

It makes itself the leader of its own process group (the SDK already starts it in a new
session), starts COMMAND in that group with the same stdin/stdout/stderr, writes
"WATCHDOG_PID SERVER_PID" to PIDFILE, and then waits. When the server exits, the watchdog
exits with its code. When the kernel dies (Linux: the kernel asked the OS to send this
process SIGTERM then, ``PR_SET_PDEATHSIG``; everywhere: the parent pid it polls is no
longer KERNEL_PID) or when it is sent SIGTERM, it ends the whole group: SIGTERM, a second
for the server to exit, then SIGKILL, so a server's own children go too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

POLL_S = 0.2
GRACE_S = 1.0
PR_SET_PDEATHSIG = 1


def _ask_for_death_signal() -> None:
    """Linux: SIGTERM to this process the moment its parent thread dies (no polling lag)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _end_group(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group, a grace period, then SIGKILL to the group (this one too)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgrp()
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGKILL)
    os._exit(1)


def _write_pids(path: str, server: int) -> None:
    partial = f"{path}.partial"
    with open(partial, "w") as file:
        file.write(f"{os.getpid()} {server}\n")
    os.replace(partial, path)


def _detach_pipes() -> None:
    """Leave stdin/stdout to the server alone, so its exit is EOF for the client at once."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: watchdog.py KERNEL_PID PIDFILE -- COMMAND ARGS...\n")
        return 2
    kernel, pidfile, command = int(argv[0]), argv[1], argv[3:]
    _ask_for_death_signal()
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)  # never end a group that is not our own (the kernel's)
    try:
        server = subprocess.Popen(command)
    except OSError as error:
        sys.stderr.write(f"cannot start {command[0]!r}: {error.strerror or error}\n")
        return 127
    signal.signal(signal.SIGTERM, lambda *_: _end_group(server))
    _write_pids(pidfile, server.pid)
    _detach_pipes()
    while True:
        if os.getppid() != kernel:
            _end_group(server)
        try:
            return _exit_code(server.wait(POLL_S))
        except subprocess.TimeoutExpired:
            continue


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

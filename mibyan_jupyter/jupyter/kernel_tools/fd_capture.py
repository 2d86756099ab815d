"""Capturing what is written to file descriptors 1 and 2 while ``run_python`` runs.

Why at the descriptor: ``os.system``, ``subprocess`` children and C extensions write to
fds 1 and 2, never to ``sys.stdout``, so swapping Python's streams (``capture.py``) misses
them. In a kernel those fds lead to ipykernel's own pipes (``capture_fd_output``: a watcher
thread forwards them to the cell's output and the terminal), so before this the output of
``os.system("echo $KEY")`` reached the notebook unredacted and the model never saw it.

How: for the block, fds 1 and 2 are pointed (``os.dup2``) at pipes of our own, and one
reader thread per pipe passes what arrives, decoded, to ``on_text`` (which records it and
streams it live, redacted). ipykernel is not fought: its pipes stay open through our saved
duplicates and are put back on every exit path, so its watcher simply sees nothing while
the block runs. C's stdio buffer is flushed before the fds go back, so ``printf`` output
lands in the block it was written in.

A child that outlives the block (``cmd &``) keeps the pipe's write end: the reader then
waits at most ``DRAIN_S`` and what the child writes later is forwarded, redacted, to the
restored descriptor (the kernel's own output), never lost and never unredacted.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Literal

from mibyan_jupyter.secrets import REDACT

StreamName = Literal["stdout", "stderr"]
OnText = Callable[[StreamName, str], None]

DRAIN_S = 0.2
"""How long the end of the block waits for output still in the pipes."""
_READ = 65_536
_FDS: tuple[tuple[int, StreamName], ...] = ((1, "stdout"), (2, "stderr"))


class _Reader:
    """One pipe's reader thread: decodes UTF-8 across reads, hands text to ``on_text``
    until detached, then forwards to ``forward_fd`` (redacted)."""

    def __init__(self, name: StreamName, read_fd: int, on_text: OnText) -> None:
        self.name: StreamName = name
        self.read_fd = read_fd
        self.forward_fd: int | None = None
        self._on_text = on_text
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"mibyan-fd-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while chunk := os.read(self.read_fd, _READ):
                self._deliver(chunk)
            self._deliver(b"", final=True)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)

    def _deliver(self, chunk: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(chunk, final)
        if not text:
            return
        with self._lock:
            forward = self.forward_fd
            if forward is None:
                self._on_text(self.name, text)
                return
        with contextlib.suppress(OSError):
            os.write(forward, REDACT(text).encode("utf-8", "replace"))

    def finish(self, forward_fd: int, wait: float) -> None:
        """Wait up to ``wait`` s for the pipe to close; then forward what comes later."""
        self._thread.join(wait)
        with self._lock:
            self.forward_fd = forward_fd


def flush_c_stdio() -> None:
    """``fflush(NULL)``: C code's buffered ``printf`` output goes out now."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def capturing_fds(on_text: OnText) -> Iterator[bool]:
    """Point fds 1 and 2 at pipes read into ``on_text`` for the block; yields whether it
    could (no usable fd 1 or 2: nothing is redirected and the block runs as it is)."""
    saved: list[tuple[int, int]] = []
    readers: list[_Reader] = []
    try:
        for fd, name in _FDS:
            copy = os.dup(fd)
            read_fd, write_fd = os.pipe()
            saved.append((fd, copy))
            os.dup2(write_fd, fd)
            os.close(write_fd)
            readers.append(_Reader(name, read_fd, on_text))
    except OSError:
        _restore(saved, readers)
        yield False
        return
    try:
        yield True
    finally:
        _restore(saved, readers)


def _restore(saved: list[tuple[int, int]], readers: list[_Reader]) -> None:
    """Put the saved fds back (closing our write ends), then let the readers drain. Every
    step is done even when a second Kernel > Interrupt lands meanwhile (then re-raised):
    a kernel left with fd 1 on a dead pipe would lose all its output."""
    interrupt: KeyboardInterrupt | None = None
    steps: list[Callable[[], None]] = [flush_c_stdio]
    steps += [functools.partial(_put_back, copy, fd) for fd, copy in saved]
    steps += [
        functools.partial(reader.finish, fd, DRAIN_S)
        for reader, (fd, _) in zip(readers, saved, strict=False)
    ]
    steps += [functools.partial(_close_once, copy, set()) for _fd, copy in saved]
    for step in steps:
        for _attempt in range(3):
            try:
                step()
                break
            except KeyboardInterrupt as error:
                interrupt = error
    if interrupt is not None:
        raise interrupt


def _put_back(copy: int, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.dup2(copy, fd)


def _close_once(fd: int, closed: set[int]) -> None:
    """Close ``fd`` at most once, also when retried (its number may be reused)."""
    if fd in closed:
        return
    closed.add(fd)
    with contextlib.suppress(OSError):
        os.close(fd)

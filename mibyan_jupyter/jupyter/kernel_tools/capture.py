"""Capturing what code prints and displays, in order, as nbformat v4 outputs.

Why not ``IPython.utils.capture.capture_output``: it keeps stdout, stderr and displays in
three separate piles, so "print, plot, print" could not be replayed in order, and it only
swaps the publisher of ``get_ipython()``. Here one :class:`OutputLog` receives every write
and every ``display()`` as it happens, which is exactly a code cell's output list; the
notebook export turns it into one.

``display()`` always publishes through ``InteractiveShell.instance()``, so that is the
shell whose publisher is swapped (and the shell passed in, if it is another one). With no
shell at all, ``display()`` prints, and the print is captured as stdout.

What reaches file descriptors 1 and 2 directly (``os.system``, C code) is read by
``fd_capture.py`` on its own threads into the same log, so the log is thread-safe; each
write may also go to a live ``echo`` (the card's streaming output).
"""

from __future__ import annotations

import base64
import io
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from mibyan_jupyter.export.outputs import stream_output

STORED_LIMIT = 200_000
"""Characters of stream output kept per run; a print loop must not fill the store."""
Echo = Callable[[Literal["stdout", "stderr"], str], None]
"""Where each stream write also goes as it happens (raw text; the receiver redacts)."""


class OutputLog:
    """Outputs in the order they happened; consecutive writes to one stream are joined."""

    def __init__(self, limit: int = STORED_LIMIT) -> None:
        self.outputs: list[dict[str, Any]] = []
        self._limit = limit
        self._chars = 0
        self._dropped = 0
        self._clear_pending = False
        self._display_ids: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.RLock()
        self.echo: Echo | None = None
        self._open: tuple[dict[str, Any], list[str]] | None = None
        """The last stream output and its text still in parts: joined once when another
        output follows (``+=`` on it per write was quadratic in a print loop)."""

    def stream(self, name: Literal["stdout", "stderr"], text: str) -> None:
        if not text:
            return
        echo = self.echo
        if echo is not None:
            echo(name, text)
        with self._lock:
            self._stream(name, text)

    def _stream(self, name: Literal["stdout", "stderr"], text: str) -> None:
        self._maybe_clear()
        room = self._limit - self._chars
        if len(text) > room:
            self._dropped += len(text) - room
            text = text[:room]
            if not text:
                return
        self._chars += len(text)
        if self._open is not None and self._open[0]["name"] == name:
            self._open[1].append(text)
            return
        self._seal()
        last = self.outputs[-1] if self.outputs else None
        if last is None or last["output_type"] != "stream" or last["name"] != name:
            last = stream_output(name, "")
            self.outputs.append(last)
        self._open = (last, [text])

    def _seal(self) -> None:
        if self._open is not None:
            output, parts = self._open
            output["text"] += "".join(parts)
            self._open = None

    def display(
        self,
        data: Mapping[str, Any],
        metadata: Mapping[str, Any] | None = None,
        *,
        display_id: str | None = None,
        update: bool = False,
    ) -> None:
        bundle, meta = json_bundle(data), dict(metadata or {})
        with self._lock:
            self._display(bundle, meta, display_id, update=update)

    def _display(
        self,
        bundle: dict[str, Any],
        meta: dict[str, Any],
        display_id: str | None,
        *,
        update: bool,
    ) -> None:
        self._seal()
        if update:  # update_display: change the outputs already shown under this id
            for output in self._display_ids.get(display_id or "", []):
                output["data"], output["metadata"] = bundle, meta
            return
        self._maybe_clear()
        output = {"output_type": "display_data", "data": bundle, "metadata": meta}
        self.outputs.append(output)
        if display_id:
            self._display_ids.setdefault(display_id, []).append(output)

    def result(self, data: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> None:
        """The value of the code's last expression, like a cell's ``Out``."""
        output = {
            "output_type": "execute_result",
            "data": json_bundle(data),
            "metadata": dict(metadata or {}),
            "execution_count": None,
        }
        with self._lock:
            self._seal()
            self._maybe_clear()
            self.outputs.append(output)

    def clear(self, *, wait: bool = False) -> None:
        """``clear_output()``; with ``wait`` the clearing happens at the next output."""
        with self._lock:
            self._clear(wait=wait)

    def _clear(self, *, wait: bool) -> None:
        self._seal()
        if wait:
            self._clear_pending = True
        else:
            self.outputs.clear()
            self._display_ids.clear()
            self._chars = 0

    def finish(self) -> list[dict[str, Any]]:
        """The outputs, with a note when stream output was dropped for size."""
        with self._lock:
            self._seal()
            if self._dropped:
                note = f"\n[{self._dropped:,} more characters of output were not kept]\n"
                self.outputs.append(stream_output("stderr", note))
                self._dropped = 0
            return self.outputs

    def _maybe_clear(self) -> None:
        if self._clear_pending:
            self._clear_pending = False
            self._clear(wait=False)


def json_bundle(data: Mapping[str, Any]) -> dict[str, Any]:
    """A MIME bundle whose values are JSON: bytes become base64 (images) or text."""
    bundle: dict[str, Any] = {}
    for mime, value in data.items():
        if isinstance(value, bytes):
            is_image = mime.startswith("image/") and not mime.endswith("+xml")
            value = (
                base64.b64encode(value).decode("ascii")
                if is_image
                else value.decode("utf-8", "replace")
            )
        elif not isinstance(value, str | dict | list):
            value = str(value)
        bundle[str(mime)] = value
    return bundle


class _Tap(io.TextIOBase):
    """A text stream that writes into an :class:`OutputLog`."""

    def __init__(
        self, log: OutputLog, name: Literal["stdout", "stderr"], fd: int | None = None
    ) -> None:
        super().__init__()
        self._log = log
        self._name: Literal["stdout", "stderr"] = name
        self._fd = fd

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        """The captured descriptor, while fds are captured (``subprocess.run(...,
        stdout=sys.stdout)`` then writes into the same log); else none, as before."""
        if self._fd is None:
            raise io.UnsupportedOperation("fileno")
        return self._fd

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._log.stream(self._name, text)
        return len(text)


def _publisher(log: OutputLog, original: Any) -> Any:
    """An IPython display publisher that records into ``log`` (IPython imported late).
    Whatever else the kernel asks of the publisher goes to ``original``: ipykernel calls
    ``set_parent`` on it for every message a kernel subshell handles while the code runs
    (without it those messages, a Stop click among them, were dropped)."""
    from IPython.core.displaypub import DisplayPublisher

    class LogPublisher(DisplayPublisher):
        def set_parent(self, parent: Any) -> None:
            forward = getattr(original, "set_parent", None)
            if callable(forward):
                forward(parent)

        def publish(
            self,
            data: dict[str, Any],
            metadata: dict[str, Any] | None = None,
            source: Any = None,
            *,
            transient: dict[str, Any] | None = None,
            update: bool = False,
            **kwargs: Any,
        ) -> None:
            display_id = (transient or {}).get("display_id")
            log.display(data, metadata, display_id=display_id, update=update)

        def clear_output(self, wait: bool = False) -> None:
            log.clear(wait=wait)

    return LogPublisher()  # type: ignore[no-untyped-call]


def display_shells(shell: Any | None) -> list[Any]:
    """The shells whose publisher ``display()`` may reach: the given one and the global
    instance, when IPython has made one (never creating it)."""
    shells = [] if shell is None else [shell]
    module = sys.modules.get("IPython.core.interactiveshell")
    if module is not None and module.InteractiveShell.initialized():
        instance = module.InteractiveShell.instance()
        if all(instance is not s for s in shells):
            shells.append(instance)
    return [s for s in shells if hasattr(s, "display_pub")]


@contextmanager
def capturing(log: OutputLog, shells: Sequence[Any], *, fds: bool = False) -> Iterator[None]:
    """Route stdout, stderr and the shells' displays into ``log`` for the block; with
    ``fds`` (fds 1 and 2 are captured into ``log`` too) the streams report those fds.

    Swapping process-wide streams is safe only because the code runs synchronously on the
    loop thread: nothing else runs on that thread until the block ends."""
    saved_streams = sys.stdout, sys.stderr
    saved_publishers = [(s, s.display_pub) for s in shells]
    publisher = _publisher(log, shells[0].display_pub) if shells else None
    sys.stdout = _Tap(log, "stdout", 1 if fds else None)
    sys.stderr = _Tap(log, "stderr", 2 if fds else None)
    for target, _ in saved_publishers:
        target.display_pub = publisher
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved_streams
        for target, original in saved_publishers:
            target.display_pub = original

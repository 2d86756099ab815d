"""Running code in the user's namespace the way a cell runs: statements, then the value of a
last expression displayed, with everything printed, displayed and plotted recorded as the
cell's outputs.

Why exec/eval and not ``shell.run_cell``: the ``%%agent`` cell that asked for this is itself
still running, and a nested ``run_cell`` would bump the execution count, write history and
fire the post-execute hooks (the inline backend would show the user's own figures again)
in the middle of it. IPython syntax (``%magic``, ``!cmd``) still works: with a shell the
code goes through ``shell.transform_cell`` first.

Tracebacks start at the code's own first frame: the model and the user need the failing
line of the code, not this module's ``exec``. The code is registered in ``linecache``
under a unique ``<agent-python-N>`` name, so traceback lines show its source.

With ``fds`` what child processes and C code write to fds 1 and 2 is captured too
(``fd_capture.py``), into the same outputs; ``echo`` sees every stream write as it happens
(the tool card's live output).
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import linecache
import tokenize
import traceback
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from mibyan_jupyter.jupyter.kernel_tools import figures
from mibyan_jupyter.jupyter.kernel_tools.capture import (
    Echo,
    OutputLog,
    capturing,
    display_shells,
)
from mibyan_jupyter.jupyter.kernel_tools.fd_capture import capturing_fds

FILENAME_PREFIX = "<agent-python-"
_numbers = itertools.count(1)


@dataclass
class Execution:
    """What a run produced: nbformat v4 outputs in order, and how it ended."""

    outputs: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    """The ``error`` output when the code raised (also in ``outputs``)."""
    interrupted: bool = False

    @property
    def images(self) -> list[tuple[str, str]]:
        """``(mime, base64)`` of every PNG or JPEG the run displayed, in order."""
        found = []
        for output in self.outputs:
            data = output.get("data")
            for mime in ("image/png", "image/jpeg"):
                if isinstance(data, dict) and isinstance(data.get(mime), str):
                    found.append((mime, data[mime]))
                    break
        return found


def run_code(
    code: str,
    namespace: dict[str, Any],
    *,
    shell: Any | None = None,
    echo: Echo | None = None,
    fds: bool = False,
) -> Execution:
    """Run ``code`` synchronously in ``namespace`` (globals and locals), on this thread."""
    log = OutputLog()
    log.echo = echo
    execution = Execution()
    source = _transformed(code, shell)
    filename = f"{FILENAME_PREFIX}{next(_numbers)}>"
    shown_lines = code if code.count("\n") == source.rstrip("\n").count("\n") else source
    linecache.cache[filename] = (len(shown_lines), None, shown_lines.splitlines(True), filename)
    before = figures.open_figures()
    shown: frozenset[int] = frozenset()
    descriptors = capturing_fds(log.stream) if fds else contextlib.nullcontext(False)
    with descriptors as captured, capturing(log, display_shells(shell), fds=captured):
        try:
            body, last = _compile(source, filename)
            exec(body, namespace)
            if last is not None:
                value = eval(last, namespace)
                if value is not None and not _ends_with_semicolon(source):
                    data, metadata = _format(value, shell)
                    if data:
                        log.result(data, metadata)
                        if figures.is_figure(value) and "image/png" in data:
                            shown = frozenset({id(value)})
        except KeyboardInterrupt as error:
            execution.interrupted = True
            execution.error = error_output(error)
        except BaseException as error:  # SystemExit too: the code must not end the kernel
            execution.error = error_output(error)
    outputs = log.finish()
    if execution.error is not None:
        outputs.append(execution.error)
    outputs += _figure_outputs(before, shown)
    execution.outputs = outputs
    return execution


def _transformed(code: str, shell: Any | None) -> str:
    transform = getattr(shell, "transform_cell", None)
    if transform is None:
        return code
    try:
        result = transform(code)
    except Exception:  # leave it to the compiler to report
        return code
    return result if isinstance(result, str) else code


def _compile(source: str, filename: str) -> tuple[CodeType, CodeType | None]:
    """The statements, and the last statement separately when it is an expression.
    ``dont_inherit``: this module's ``from __future__`` imports must not change the code."""
    tree = ast.parse(source, filename, "exec")
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = compile(ast.Expression(final.value), filename, "eval", dont_inherit=True)
    return compile(tree, filename, "exec", dont_inherit=True), last


def _ends_with_semicolon(source: str) -> bool:
    """A trailing ``;`` hides the last expression's value, as in a cell."""
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER}
    skipped |= {tokenize.INDENT, tokenize.DEDENT}
    last = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in skipped:
                last = token
    except (tokenize.TokenError, SyntaxError):
        return False
    return last is not None and last.string == ";"


def _format(value: Any, shell: Any | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The value's MIME bundle: the shell's display formatter (HTML for a DataFrame, PNG
    for a figure under the inline backend), else IPython's pretty text."""
    formatter = getattr(shell, "display_formatter", None)
    try:
        if formatter is not None:
            data, metadata = formatter.format(value)
            return dict(data), dict(metadata or {})
        from IPython.lib.pretty import pretty

        text: str = pretty(value, max_width=100)  # type: ignore[no-untyped-call]
        return {"text/plain": text}, {}
    except Exception as error:
        return {"text/plain": f"<{type(value).__name__}: repr failed: {error!r}>"}, {}


def error_output(error: BaseException) -> dict[str, Any]:
    """An nbformat ``error`` output whose traceback starts at the code's first frame."""
    tb = error.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(FILENAME_PREFIX):
        tb = tb.tb_next
    lines = traceback.format_exception(type(error), error, tb)
    return {
        "output_type": "error",
        "ename": type(error).__name__,
        "evalue": str(error),
        "traceback": [line.rstrip("\n") for line in lines],
    }


def _figure_outputs(before: list[Any], shown: frozenset[int]) -> list[dict[str, Any]]:
    outputs = []
    for figure in figures.new_figures(before, skip=shown):
        try:
            outputs.append(figures.figure_output(figure))
        except Exception as error:
            note = f"A figure could not be rendered: {type(error).__name__}: {error}\n"
            outputs.append({"output_type": "stream", "name": "stderr", "text": note})
        finally:
            figures.close(figure)
    for figure in figures.new_figures(before):  # shown as the result: close it too
        figures.close(figure)
    return outputs

"""``python -m mibyan_jupyter.quickstart [NOTEBOOK]``: execute a notebook of ``%%agent`` cells
in a fresh kernel, the way CI, nbconvert or papermill would, and print what each cell showed.

With no key the demo model answers. Nobody can click Approve here, so calls that need
approval are denied by the policy (with the reason in the output) and the run completes:
a notebook of ``%%agent`` cells never hangs without a browser. The executed copy is written
next to the input as ``<name>.executed.ipynb`` unless ``--output`` says otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from mibyan_jupyter.export.outputs import plain_text

DEFAULT = Path("notebooks/01-quickstart.ipynb")


def _plain(output: dict[str, Any]) -> str:
    """What a terminal can show of one output: Markdown when there is some (the agent's
    transcript), else the output's plain text; an error as its one-line summary."""
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    markdown = output.get("data", {}).get("text/markdown")
    if markdown:
        return "".join(markdown) if isinstance(markdown, list) else str(markdown)
    return plain_text(output)


def execute(path: Path, output: Path | None = None, timeout: int = 120) -> Path:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    started = time.perf_counter()
    client.execute()
    target = output or path.with_name(path.stem + ".executed.ipynb")
    nbformat.write(notebook, target)  # type: ignore[no-untyped-call]
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        print(f"\n── cell {index}: {cell.source.splitlines()[0] if cell.source else ''}")
        for item in cell.get("outputs", []):
            text = _plain(item).strip()
            if text:
                print("   " + "\n   ".join(text.splitlines()[:40]))
    print(f"\nExecuted {path} in {time.perf_counter() - started:.1f} s -> {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    args = parser.parse_args(argv)
    if not args.notebook.exists():
        print(f"no such notebook: {args.notebook}", file=sys.stderr)
        return 2
    execute(args.notebook, args.output, args.timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

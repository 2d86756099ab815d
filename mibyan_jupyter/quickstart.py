"""``python -m mibyan_jupyter.quickstart [NOTEBOOK]``: execute a notebook of ``%%agent`` cells
in a fresh kernel, the way CI, nbconvert or papermill would, and print what each cell showed.

With no key the demo model answers. Nobody can click Approve here, so calls that need
approval are denied by the policy (with the reason in the output) and the run completes:
a notebook of ``%%agent`` cells never hangs without a browser.

The run happens in a work folder (``build/demo`` by default), never in the notebook's own folder:
the notebook's folder is copied there first (so relative data files still resolve), the kernel
runs in the copy, and whatever the cells write (``%agent export``) and the executed notebook
``<name>.executed.ipynb`` land beside it. ``notebooks/`` holds only the teaching notebooks, so
``make demo`` followed by ``make test`` does not find extra notebooks there.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from mibyan_jupyter.export.outputs import plain_text

DEFAULT = Path("notebooks/01-quickstart.ipynb")
WORKDIR = Path("build/demo")


def _plain(output: dict[str, Any]) -> str:
    """What a terminal can show of one output: Markdown when there is some (the agent's
    transcript), else the output's plain text; an error as its one-line summary."""
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    markdown = output.get("data", {}).get("text/markdown")
    if markdown:
        return "".join(markdown) if isinstance(markdown, list) else str(markdown)
    return plain_text(output)


def prepare_workdir(path: Path, workdir: Path) -> Path:
    """Copy the notebook's folder into ``workdir`` (replacing an earlier copy) and return the
    notebook's path inside it: the run may write files, the source folder stays as it is."""
    source = path.parent.resolve()
    workdir = workdir.resolve()
    if workdir == source or source in workdir.parents:
        raise ValueError(f"the work folder {workdir} must be outside {source}")
    if workdir.exists():
        shutil.rmtree(workdir)
    shutil.copytree(
        source, workdir, ignore=shutil.ignore_patterns("*.executed.ipynb", ".ipynb_checkpoints")
    )
    return workdir / path.name


def execute(path: Path, workdir: Path = WORKDIR, timeout: int = 120) -> Path:
    import nbformat
    from nbclient import NotebookClient

    copy = prepare_workdir(path, workdir)
    notebook = nbformat.read(copy, as_version=4)  # type: ignore[no-untyped-call]
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(copy.parent)}},
    )
    started = time.perf_counter()
    client.execute()
    target = copy.with_name(copy.stem + ".executed.ipynb")
    nbformat.write(notebook, target)  # type: ignore[no-untyped-call]
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        print(f"\n── cell {index}: {cell.source.splitlines()[0] if cell.source else ''}")
        for item in cell.get("outputs", []):
            text = _plain(item).strip()
            if text:
                print("   " + "\n   ".join(text.splitlines()[:120]))
    print(f"\nExecuted {path} in {time.perf_counter() - started:.1f} s -> {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=WORKDIR,
        help="folder the notebook runs in and its outputs go to (default: build/demo)",
    )
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    args = parser.parse_args(argv)
    if not args.notebook.exists():
        print(f"no such notebook: {args.notebook}", file=sys.stderr)
        return 2
    try:
        execute(args.notebook, args.workdir, args.timeout)
    except ValueError as error:
        print(f"mibyan quickstart: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

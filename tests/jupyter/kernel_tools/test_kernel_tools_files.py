"""The "files" group on real files: reading, listing, writing, and every way out of the
notebook's folder refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core import AbortSignal, Tool, ToolResult
from mibyan_jupyter.core.tools import ToolArgumentsError
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.files import FOLDER_LIMIT


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A notebook folder with a file, a subfolder, and a secret next to it (outside)."""
    notebook = tmp_path / "project"
    (notebook / "data").mkdir(parents=True)
    (notebook / "notes.txt").write_text("first line\nsecond line\n")
    (notebook / "data" / "table.csv").write_text("a,b\n1,2\n")
    (tmp_path / "secret.txt").write_text("outside the notebook folder")
    (tmp_path / "elsewhere").mkdir()
    return notebook


def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in kernel_tools(["files"], namespace={}, root=root)}


def call(tool: Tool, **args: Any) -> ToolResult:
    result = tool.execute("call", tool.validate(args), AbortSignal(), lambda _: None)
    assert isinstance(result, ToolResult)
    return result


def text(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content


def test_read_file(root: Path) -> None:
    result = call(tools(root)["read_file"], path="notes.txt")
    assert not result.is_error
    assert result.content == "first line\nsecond line\n"
    assert result.details == {"path": "notes.txt", "size": 23, "truncated": False}
    nested = call(tools(root)["read_file"], path="data/../data/table.csv")
    assert nested.content == "a,b\n1,2\n"
    absolute_inside = call(tools(root)["read_file"], path=str(root / "notes.txt"))
    assert not absolute_inside.is_error


def test_read_file_truncates_with_a_note(root: Path) -> None:
    (root / "long.txt").write_text("z" * 5_000)
    result = call(tools(root)["read_file"], path="long.txt", max_chars=100)
    body = text(result)
    assert body.startswith("z" * 100 + "\n… [truncated: the first 100 characters of a 4.9 KB file")
    assert "larger max_chars" in body
    assert result.details == {"path": "long.txt", "size": 5_000, "truncated": True}
    with pytest.raises(ToolArgumentsError):
        tools(root)["read_file"].validate({"path": "long.txt", "max_chars": 0})


def test_read_binary_file_gives_a_note(root: Path) -> None:
    (root / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(500))
    result = call(tools(root)["read_file"], path="plot.png")
    assert not result.is_error
    assert text(result) == (
        "plot.png is a binary file (image/png, 516 B); read_file only reads text. "
        "Use run_python to load it with a suitable library."
    )


def test_read_errors_say_what_to_do(root: Path) -> None:
    read = tools(root)["read_file"]
    missing = call(read, path="note.txt")
    assert missing.is_error
    assert text(missing) == (
        "Not found: 'note.txt'. Close names: notes.txt. Use list_folder('.') to see what exists."
    )
    folder = call(read, path="data")
    assert folder.is_error
    assert "is a folder; use list_folder" in text(folder)


def test_list_folder(root: Path) -> None:
    (root / "link").symlink_to(root / "notes.txt")
    result = call(tools(root)["list_folder"])
    assert result.content == (
        ".: 3 entries\ndata/\nlink -> " + str(root / "notes.txt") + " (link)\nnotes.txt (23 B)"
    )
    sub = call(tools(root)["list_folder"], path="data")
    assert sub.content == "data: 1 entry\ntable.csv (8 B)"
    not_a_folder = call(tools(root)["list_folder"], path="notes.txt")
    assert not_a_folder.is_error
    assert "use read_file" in text(not_a_folder)


def test_list_folder_is_capped(root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(FOLDER_LIMIT + 7):
        (many / f"f{i:04d}.txt").touch()
    listing = text(call(tools(root)["list_folder"], path="many"))
    lines = listing.splitlines()
    assert lines[0] == f"many: {FOLDER_LIMIT + 7} entries"
    assert len(lines) == FOLDER_LIMIT + 2
    assert lines[-1] == "… and 7 more"


def test_write_file_creates_and_refuses_to_overwrite(root: Path) -> None:
    write = tools(root)["write_file"]
    created = call(write, path="out/report.md", content="# Report\n")
    assert not created.is_error
    assert created.content == "Created out/report.md (9 bytes)."
    assert (root / "out" / "report.md").read_text() == "# Report\n"
    refused = call(write, path="notes.txt", content="gone")
    assert refused.is_error
    assert "already exists" in text(refused)
    assert "overwrite=true" in text(refused)
    assert (root / "notes.txt").read_text() == "first line\nsecond line\n"
    replaced = call(write, path="notes.txt", content="new", overwrite=True)
    assert replaced.content == "Replaced notes.txt (3 bytes)."
    assert (root / "notes.txt").read_text() == "new"
    onto_folder = call(write, path="data", content="x", overwrite=True)
    assert onto_folder.is_error
    assert (root / "data").is_dir()


ESCAPES = [
    ("../secret.txt", "'..' leads out of that folder"),
    ("data/../../secret.txt", "'..' leads out of that folder"),
    ("ABSOLUTE", "it is an absolute path outside that folder"),
    ("~/secret.txt", "it is an absolute path outside that folder"),
    ("sneaky/secret.txt", "a symbolic link on the way points outside that folder"),
    ("sneaky_file", "a symbolic link on the way points outside that folder"),
]


@pytest.mark.parametrize(("path", "why"), ESCAPES)
@pytest.mark.parametrize("tool_name", ["read_file", "list_folder", "write_file"])
def test_paths_outside_the_notebook_folder_are_refused(
    root: Path, tool_name: str, path: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = root.parent
    (root / "sneaky").symlink_to(outside, target_is_directory=True)
    (root / "sneaky_file").symlink_to(outside / "secret.txt")
    monkeypatch.setenv("HOME", str(outside))
    if path == "ABSOLUTE":
        path = str(outside / "secret.txt")
    args: dict[str, Any] = {"path": path}
    if tool_name == "write_file":
        args.update(content="overwritten", overwrite=True)
    result = call(tools(root)[tool_name], **args)
    assert result.is_error
    message = text(result)
    assert message.startswith(f"Refused: {path!r} is outside the notebook's folder")
    assert why in message
    assert (outside / "secret.txt").read_text() == "outside the notebook folder"

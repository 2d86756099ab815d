"""The magics tell the truth, through a loaded IPython shell: the help is whole and asked
for as the README says, search shows code verbatim, export keeps the user's files, bad
numbers and fallbacks are refused with one line, and nothing is lost on a refusal."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.cell.options import CELL_FLAGS
from mibyan_jupyter.jupyter.commands.common import parser
from mibyan_jupyter.jupyter.commands.dispatch import COMMANDS
from mibyan_jupyter.jupyter.commands.reference import REFERENCE
from mibyan_jupyter.jupyter.state import kernel_state


@pytest.fixture
def shell(loaded_shell: InteractiveShell) -> InteractiveShell:
    return loaded_shell


def one_line(error: BaseException | None) -> str:
    """The error's text, after checking it is a usage error shown as one line."""
    assert isinstance(error, UsageError), error
    rendered = error._render_traceback_()  # type: ignore[attr-defined]
    assert len(rendered) == 1, rendered
    assert "\n" not in rendered[0], rendered
    return str(rendered[0])


def every_flag() -> list[str]:
    return [flag.split()[0] for entry in REFERENCE for flag, _ in entry.flags]


# -- help ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["%%agent --help", "%%agent -h\n", "%%agent --model demo -h\nhi"])
def test_cell_help_works_alone_in_a_cell(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], cell: str
) -> None:
    result = shell.run_cell(cell)
    assert result.error_before_exec is None, result
    assert result.error_in_exec is None, result
    out = capsys.readouterr().out
    for flag in CELL_FLAGS:
        assert flag in out, flag
    assert kernel_state().store().list() == []  # a help request runs nothing


def test_cell_and_line_magic_docstrings_document_everything(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell("%agent?")
    line_doc = capsys.readouterr().out
    assert "no docstring" not in line_doc
    for entry in REFERENCE:
        assert f"%agent {entry.name}" in line_doc, entry.name
    for flag in every_flag():
        assert flag in line_doc, flag
    shell.run_cell("%%agent?")
    cell_doc = capsys.readouterr().out
    for flag in CELL_FLAGS:
        assert flag in cell_doc, flag
    assert "%agent help" in cell_doc


def test_agent_help_lists_every_command_and_one_command_on_request(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    for line in ("help", "--help", "-h", ""):
        shell.run_line_magic("agent", line)
        out = capsys.readouterr().out
        assert all(f"%agent {entry.name}" in out for entry in REFERENCE), line
    shell.run_line_magic("agent", "help export")
    one = capsys.readouterr().out
    shell.run_line_magic("agent", "export --help")
    assert capsys.readouterr().out == one
    assert "--force" in one
    assert "%agent sessions" not in one
    with pytest.raises(UsageError, match=r"unknown command 'frob'.*help"):
        shell.run_line_magic("agent", "help frob")
    # a lone --help only: free text that holds one is the command's text
    shell.run_cell("%%agent --model demo --tools none\nhello\n")
    shell.run_line_magic("agent", "pin always pass --help to new tools")
    assert "pass --help to new tools" in repr(shell.run_line_magic("agent", "pins"))


def test_the_reference_names_exactly_the_commands_there_are() -> None:
    assert [entry.name for entry in REFERENCE] == [*COMMANDS, "help"]


def test_a_parser_with_an_undocumented_flag_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="--secret-flag missing from its help entry"):
        parser("sessions", (("--secret-flag",), {}))
    assert parser("sessions", (("--search",), {})).parse_args(["--search", "x"]).search == "x"


def test_every_documented_flag_is_accepted(
    shell: InteractiveShell,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The help promises nothing the parsers refuse (the parsers themselves refuse to
    take a flag the help does not name, see the test above)."""
    policy = tmp_path / "policy" / "policy.toml"  # %agent review needs a roster: root's
    policy.parent.mkdir(mode=0o755)
    policy.write_text(
        '[review]\nreviewable = true\n[courses.c]\ninstructors = ["prof"]\nstudents = ["prof"]\n',
        encoding="utf-8",
    )
    policy.chmod(0o644)
    monkeypatch.setenv("MIBYAN_POLICY", str(policy))
    monkeypatch.setenv("JUPYTERHUB_USER", "prof")  # an instructor, and a student of c
    shell.run_cell("%%agent --model demo --tools none\nabout quinces\n")
    used = {
        "--search": "sessions --search quinces",
        "--notebook": "sessions --notebook",
        "--model": "sessions --model demo",
        "--limit": "sessions --limit 3",
        "--children": "sessions --children",
        "--at": "fork current --at 1",
        "--format": "export current out.md --format md",
        "--verify": "export current out2.md --format md --verify",
        "--force": "export current out.md --format md --force",
        "--user": "memory show --user",
        "--refresh": "tools --refresh",
        "--command": "mcp add m1 --command srv",
        "--arg": "mcp add m2 --command srv --arg a",
        "--env": "mcp add m3 --command srv --env A=${B}",
        "--cwd": "mcp add m4 --command srv --cwd sub",
        "--url": "mcp add m5 --url http://127.0.0.1:9/mcp",
        "--header": "mcp add m6 --url http://127.0.0.1:9/mcp --header A=${B}",
        "--timeout": "mcp add m7 --command srv --timeout 5",
        "--course": "review --course c",
        "--since": "review --since 2026-01-01",
        "--audit": "review --audit",
        "--export": f"review --user prof --export {tmp_path / 'appendix'}",
    }
    assert sorted(used) == sorted(set(every_flag()))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "conf"))  # mcp add writes there
    for _flag, line in used.items():
        shell.run_line_magic("agent", line)  # raises a UsageError if refused
    with pytest.raises(UsageError, match=r"unrecognized arguments: --nosuch.*usage: %agent"):
        shell.run_line_magic("agent", "sessions --nosuch")


@pytest.mark.parametrize("limit", ["0", "-1", "10001", "many"])
def test_a_bad_limit_is_one_line(shell: InteractiveShell, limit: str) -> None:
    result = shell.run_cell(f"%agent sessions --limit {limit}")
    assert "--limit must be an integer from 1 to 10,000" in one_line(result.error_in_exec)


@pytest.mark.parametrize("at", ["-3", "99", "x"])
def test_a_bad_fork_point_names_the_range(shell: InteractiveShell, at: str) -> None:
    shell.run_cell("%%agent --model demo --tools none\nhello\n")
    result = shell.run_cell(f"%agent fork last --at={at}")
    assert "--at must be an integer from 0 to 2" in one_line(result.error_in_exec)
    assert len(kernel_state().store().list()) == 1


# -- numbers and fallbacks ----------------------------------------------------------------

REFUSED = [
    ("--max-cost nan", "--max-cost must be a positive number of at most 10,000 US dollars"),
    ("--max-cost inf", "--max-cost must be a positive number"),
    ("--max-cost=-inf", "--max-cost must be a positive number"),
    ("--max-cost 1e309", "--max-cost must be a positive number"),
    ("--max-cost -0.5", "--max-cost must be a positive number"),
    ("--max-cost 0", "--max-cost must be a positive number"),
    ("--max-cost 10000.01", "at most 10,000 US dollars; got '10000.01'"),
    ("--max-turns 100001", "--max-turns must be a positive integer of at most 100,000"),
    ("--max-turns 2.5", "--max-turns must be a positive integer"),
    ("--max-turns -3", "--max-turns must be a positive integer"),
    ("--max-tokens 100000001", "at most 100,000,000 tokens"),
    ("--max-tokens nan", "--max-tokens must be a positive integer"),
    ("--context-window 0", "--context-window must be a positive integer"),
    ("--context-window 1000000000", "at most 100,000,000 tokens"),
]


@pytest.mark.parametrize(("line", "message"), REFUSED)
def test_absurd_numbers_are_refused_before_anything_runs(
    shell: InteractiveShell, line: str, message: str
) -> None:
    result = shell.run_cell(f"%%agent --model demo {line}\nhello\n")
    assert message in one_line(result.error_in_exec)
    assert kernel_state().store().list() == []  # nothing was sent, nothing stored


def test_the_largest_sensible_numbers_are_accepted(shell: InteractiveShell) -> None:
    line = "--max-cost 10000 --max-turns 100000 --max-tokens 100000000 --context-window 8192"
    result = shell.run_cell(f"%%agent --model demo --tools none {line}\nhello\n")
    assert result.error_in_exec is None, result.error_in_exec


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("max_cost", "float('nan')"),
        ("max_cost", "float('inf')"),
        ("max_cost", "-1.0"),
        ("max_cost", "20000.0"),
        ("max_turns", "-1"),
        ("max_turns", "10**6"),
        ("max_tokens", "10**9"),
        ("context_window", "-5"),
        ("headless_wait", "float('nan')"),
        ("headless_wait", "-1.0"),
    ],
)
def test_config_refuses_the_same_values_and_keeps_the_old_one(
    shell: InteractiveShell, caplog: pytest.LogCaptureFixture, setting: str, value: str
) -> None:
    before = getattr(kernel_state().defaults, setting)
    with caplog.at_level(logging.ERROR):
        shell.run_line_magic("config", f"AgentMagics.{setting} = {value}")
    assert f"AgentMagics.{setting} must be 0" in caplog.text
    assert getattr(kernel_state().defaults, setting) == before


def test_config_accepts_zero_and_sensible_values(shell: InteractiveShell) -> None:
    shell.run_line_magic("config", "AgentMagics.max_cost = 2.5")
    shell.run_line_magic("config", "AgentMagics.max_turns = 0")
    assert (kernel_state().defaults.max_cost, kernel_state().defaults.max_turns) == (2.5, 0)


def test_a_bad_profile_value_warns_and_the_magics_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from traitlets.config import Config

    from mibyan_jupyter.jupyter.state import reset_kernel_state

    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "s.sqlite3"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.AgentMagics.max_cost = float("nan")
    config.AgentMagics.max_turns = 7
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_line_magic("load_ext", "mibyan_jupyter")
        assert "agent" in ip.magics_manager.magics["line"]
        defaults = kernel_state().defaults
        assert (defaults.max_cost, defaults.max_turns) == (0.0, 7)  # the bad one only: default
        assert "AgentMagics.max_cost must be 0 (unlimited)" in capsys.readouterr().err
    finally:
        ip.run_line_magic("unload_ext", "mibyan_jupyter")
        reset_kernel_state()
        InteractiveShell.clear_instance()


@pytest.mark.parametrize(
    ("fallback", "message"),
    [
        ("nosuch:x", "--fallback 'nosuch:x': unknown provider 'nosuch'"),
        ("gpt5", "--fallback 'gpt5': cannot tell which server runs 'gpt5'"),
        ("anthropic:claude-sonnet-4-5", "needs an API key: set ANTHROPIC_API_KEY"),
    ],
)
def test_fallbacks_are_checked_like_the_model(
    shell: InteractiveShell, fallback: str, message: str
) -> None:
    result = shell.run_cell(f"%%agent --model demo --fallback demo-slow {fallback}\nhello\n")
    text = one_line(result.error_in_exec)
    assert message in text
    if "provider" in message:
        assert "Known providers: openai, anthropic" in text
    assert kernel_state().store().list() == []


def test_a_configured_fallback_is_checked_too(shell: InteractiveShell) -> None:
    shell.run_line_magic("config", "AgentMagics.fallback_models = ['nosuch:x']")
    result = shell.run_cell("%%agent --model demo\nhello\n")
    assert "--fallback 'nosuch:x'" in one_line(result.error_in_exec)
    result = shell.run_cell("%%agent --model demo --tools none --fallback demo\nhello\n")
    assert result.error_in_exec is None, result.error_in_exec  # the cell's own list wins


# -- export -------------------------------------------------------------------------------


def _session(shell: InteractiveShell) -> str:
    result = shell.run_cell("%%agent --model demo --tools none\nabout apricots\n")
    assert result.error_in_exec is None, result.error_in_exec
    (info,) = kernel_state().store().list()
    return info.id


def test_export_keeps_an_existing_file_unless_forced(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    session = _session(shell)
    for name in ("mine.ipynb", "mine.md", f"session-{session[:8]}.ipynb"):
        (tmp_path / name).write_text("the user's own work")
        target = f" {name}" if not name.startswith("session-") else ""
        result = shell.run_cell(f"%agent export {session[:8]}{target}")
        assert "add --force to overwrite it" in one_line(result.error_in_exec)
        assert (tmp_path / name).read_text() == "the user's own work"
    shell.run_line_magic("agent", f"export {session[:8]} mine.ipynb --force")
    shell.run_line_magic("agent", f"export {session[:8]} mine.md --force")
    assert "apricots" in (tmp_path / "mine.ipynb").read_text()
    assert "apricots" in (tmp_path / "mine.md").read_text()
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder no file can be created in, also for root (immutable when chmod is not
    enough); skipped only where neither works."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    immutable = False
    if _writable(folder) and shutil.which("chattr"):
        immutable = subprocess.run(["chattr", "+i", str(folder)], check=False).returncode == 0
    try:
        if _writable(folder):
            pytest.skip("no way to make a read-only folder here")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o700)


def _writable(folder: Path) -> bool:
    probe = folder / ".probe"
    try:
        probe.touch()
    except OSError:
        return False
    probe.unlink()
    return True


def test_unwritable_paths_are_one_line(
    shell: InteractiveShell, tmp_path: Path, read_only_folder: Path
) -> None:
    session = _session(shell)[:8]
    (tmp_path / "afolder").mkdir()
    cases = {
        "afolder": "it is a folder",
        "missing/deeper/out.ipynb": "the folder missing/deeper does not exist",
        "missing/out.md": "the folder missing does not exist",
        f"{read_only_folder}/out.ipynb": f"no permission to write in {read_only_folder}",
        f"{read_only_folder}/out.md": f"no permission to write in {read_only_folder}",
    }
    for path, message in cases.items():
        result = shell.run_cell(f"%agent export {session} {path}")
        text = one_line(result.error_in_exec)
        assert message in text, (path, text)
        assert path in text, (path, text)
    assert os.listdir(read_only_folder) == []
    assert list((tmp_path / "afolder").iterdir()) == []


# -- search -------------------------------------------------------------------------------

PROMPT = (
    'sales["year"] [see <script>alert(1)</script>] \ue000x\ue001\n'
    "    for row in sales:\n        print(row)"
)


def test_search_shows_code_verbatim_and_marks_only_the_matches(shell: InteractiveShell) -> None:
    result = shell.run_cell(f"%%agent --model demo --tools none\n{PROMPT}\n")
    assert result.error_in_exec is None, result.error_in_exec
    table = shell.run_line_magic("agent", "sessions --search sales")
    bundle = table._repr_mimebundle_()
    page = bundle["text/html"]
    assert "<mark>sales</mark>[&quot;year&quot;]" in page
    marked = re.findall(r"<mark>(.*?)</mark>", page)
    assert len(marked) >= 2
    assert set(marked) == {"sales"}
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\ue000x\ue001" in page
    assert "white-space: pre-wrap" in page
    plain = bundle["text/plain"]
    lines = plain.splitlines()
    (first,) = [n for n, line in enumerate(lines) if "user" in line and "sales[" in line]
    column = lines[first].rindex('sales["year"] [see <script>')  # verbatim, no marks
    assert lines[first + 1][column:] == "    for row in sales:"  # its lines and indentation
    assert lines[first + 2][column:] == "        print(row)"
    year = shell.run_line_magic("agent", "sessions --search year")._repr_html_()
    assert "sales[&quot;<mark>year</mark>&quot;]" in year


# -- secrets ------------------------------------------------------------------------------


def test_a_short_secret_never_reaches_the_store(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibyan_jupyter.secrets import REDACTED

    monkeypatch.setenv("WAREHOUSE_PASSWORD", "s3cr3t")  # 6 characters: redacted now
    result = shell.run_cell(
        "%%agent --model demo --tools none\nmy password is s3cr3t, not s3cr3tive\n"
    )
    assert result.error_in_exec is None, result.error_in_exec
    texts = [t for (t,) in kernel_state().store().db.conn.execute("SELECT text FROM messages")]
    assert texts
    assert all("s3cr3t," not in t for t in texts)
    assert any(f"my password is {REDACTED}, not s3cr3tive" in t for t in texts)
    title = kernel_state().store().list()[0].title
    assert "s3cr3t," not in title


def test_export_never_replaces_a_device_and_follows_a_link(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    session = _session(shell)[:8]
    result = shell.run_cell(f"%agent export {session} /dev/null --force")
    assert "cannot write /dev/null: it is not a regular file" in one_line(result.error_in_exec)
    assert Path("/dev/null").is_char_device()
    real = tmp_path / "real.md"
    real.write_text("old")
    (tmp_path / "link.md").symlink_to(real)
    result = shell.run_cell(f"%agent export {session} link.md")
    assert "already exists: add --force" in one_line(result.error_in_exec)
    shell.run_line_magic("agent", f"export {session} link.md --force")
    assert (tmp_path / "link.md").is_symlink()
    assert "apricots" in real.read_text()

"""What every ``%agent`` command takes and does, written once: ``%agent help``,
``%agent --help``, ``%agent?`` (the line magic's docstring) and the one-line usage errors
are all generated from :data:`REFERENCE`.

Why a table and not hand-written help: a help text written next to the code drifts from
it (``%agent?`` said "no docstring", and flags went undocumented). Each command's parser
is checked against its entry when it is built (:func:`undocumented`), and a test checks
that every documented flag is accepted, so the help cannot promise what the parser
refuses or hide what it takes. This module imports nothing but the standard library:
the magics read it when ``%load_ext`` runs, which must stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandHelp:
    """One ``%agent`` command: its synopsis, what it does, and each flag's meaning."""

    name: str
    synopsis: str
    """The arguments after the name, e.g. ``ID [PATH] [--force]``."""
    summary: str
    flags: tuple[tuple[str, str], ...] = ()
    """``("--limit N", "meaning")`` pairs; the first word is the flag as typed."""

    def usage(self) -> str:
        return f"%agent {self.name} {self.synopsis}".rstrip()

    def text(self) -> str:
        lines = [self.usage(), f"    {self.summary}"]
        width = max((len(flag) for flag, _ in self.flags), default=0)
        lines += [f"    {flag.ljust(width)}  {meaning}" for flag, meaning in self.flags]
        return "\n".join(lines)


REFERENCE: tuple[CommandHelp, ...] = (
    CommandHelp(
        "sessions",
        "[--search TEXT] [--notebook] [--model M] [--limit N] [--children]",
        "list the stored sessions (newest first), or search every message",
        (
            ("--search TEXT", 'messages with every word (a "quoted phrase"; pand* = prefix)'),
            ("--notebook", "only this notebook's sessions"),
            ("--model M", "only the sessions of model M"),
            ("--limit N", "at most N rows (default 20, at most 10,000)"),
            ("--children", "also the sessions of delegated child agents (hidden by default)"),
        ),
    ),
    CommandHelp(
        "resume",
        "[last|current|ID]",
        "show a session's history; the next %%agent cells continue it (default: last)",
    ),
    CommandHelp(
        "fork",
        "ID [--at N]",
        "copy a session into a new one; the next %%agent cells continue the copy",
        (("--at N", "copy only its first N messages"),),
    ),
    CommandHelp(
        "export",
        "ID [PATH] [--format ipynb|md] [--verify] [--force]",
        "write a session as a runnable notebook or Markdown (PATH: session-ID.ipynb here)",
        (
            ("--format F", "ipynb or md (default: from PATH's suffix, else ipynb)"),
            ("--verify", "re-run the notebook in a fresh kernel and list outputs that differ"),
            ("--force", "overwrite PATH if it exists (without it an existing file is kept)"),
        ),
    ),
    CommandHelp("stop", "", "stop the running agent (the cell ends normally, 'stopped')"),
    CommandHelp("status", "", "the current session, its model, usage and the database"),
    CommandHelp(
        "policy",
        "[show | set TOOL allow|deny|ask | reset [TOOL]]",
        'the approval rules; "allow"/"deny" are saved as "always" (only from a cell you run)',
    ),
    CommandHelp(
        "config",
        "",
        "the settings %%agent cells start from (change: %config AgentMagics.NAME = VALUE)",
    ),
    CommandHelp("models", "", "the models you can use and whether their keys are set"),
    CommandHelp("delete", "ID", "delete a session and its messages"),
    CommandHelp(
        "memory",
        "[show | add TEXT | replace OLD NEW | remove OLD | path] [--user]",
        "what the agent remembers across sessions (MEMORY.md)",
        (("--user", "USER.md (your preferences) instead of MEMORY.md"),),
    ),
    CommandHelp(
        "mcp",
        "[list | add NAME | remove NAME | enable NAME | disable NAME | tools [NAME] | trust"
        " | untrust]",
        "MCP servers (your file; a folder's .jupyter/mcp.json once trusted): %%agent --tools"
        " mcp:NAME",
        (
            ("--command CMD", "add: a stdio server's command"),
            ("--arg A", "add: one argument of the command (repeat; --arg=-x for a dash)"),
            ("--env K=V", "add: an environment variable; a secret as K=${{VAR}} (repeat)"),
            ("--cwd DIR", "add: the folder the command starts in"),
            ("--url URL", "add: a Streamable HTTP server's URL"),
            ("--header K=V", "add: an HTTP header; a secret as K=${{VAR}} (repeat)"),
            ("--timeout S", "add: seconds one tool call may take (default 60)"),
        ),
    ),
    CommandHelp(
        "tools",
        "[--refresh]",
        "every tool group --tools can name (built-in, plugins, MCP): default? which ask?",
        (("--refresh", "read the installed plugins again (after a pip install here)"),),
    ),
    CommandHelp(
        "review",
        "[--course C] [--user U] [--since DATE] [--search TEXT] [--audit] [--export DIR]",
        "instructors: their students' sessions with usage and cost (the admin policy's roster)",
        (
            ("--course C", "only the students of course C (one of yours)"),
            ("--user U", "only student U"),
            ("--since DATE", "sessions active since DATE (YYYY-MM-DD, UTC)"),
            ("--search TEXT", "only sessions with a message containing TEXT"),
            ("--audit", "the audit trail (approvals, denials, cap hits) instead of sessions"),
            ("--export DIR", "write --user's sessions and an AI use appendix into DIR"),
            ("--format F", "with --export: md (default) or ipynb"),
            ("--limit N", "at most N rows (default 200)"),
        ),
    ),
    CommandHelp("compact", "", "summarise the older messages of the current session now"),
    CommandHelp("pin", "TEXT", "an instruction kept in the system prompt (never summarised)"),
    CommandHelp("pins", "", "the pinned instructions, numbered"),
    CommandHelp("unpin", "N", "remove pinned instruction N (as %agent pins numbers them)"),
    CommandHelp("help", "[COMMAND]", "this text, or one command's (also %agent COMMAND --help)"),
)
"""Every ``%agent`` command, in the order the help lists them."""

BY_NAME = {entry.name: entry for entry in REFERENCE}

FOOTER = (
    'ID is a session id or its first characters, "last" or "current" (this notebook\'s).\n'
    "A %%agent cell's options: %%agent --help (alone in a cell) or %%agent?"
)


def commands_help() -> str:
    """The whole reference: what ``%agent help`` prints and ``%agent?`` shows."""
    return "\n".join([*(entry.text() for entry in REFERENCE), FOOTER])


def command_help(name: str) -> str | None:
    """One command's entry, ``None`` for a name that is not a command."""
    entry = BY_NAME.get(name)
    return None if entry is None else entry.text()


def undocumented(name: str, flags: list[str]) -> list[str]:
    """The long flags a parser of ``%agent <name>`` takes that its entry does not name."""
    entry = BY_NAME.get(name)
    documented = {flag.split()[0] for flag, _ in entry.flags} if entry else set()
    return [flag for flag in flags if flag.startswith("--") and flag not in documented]


COMMANDS_HELP = commands_help()

"""A one-line warning for the approval card when a call looks destructive.

This is a hint for the person deciding, never a safety mechanism: every side-effecting call
asks for approval whether or not anything is flagged, because no pattern list can recognise
every harmful command (``python -c`` can do anything). It flags what is easy to overlook in
a long command: recursive deletes, disk formatting and raw writes, recursive permission
changes on system folders, discarding git work, fork bombs, shutdown, ``sudo``, piping a
download into a shell, overwriting a file with ``>``, ``find -delete``; in Python code the
same inside ``!`` lines and ``os.system``/``subprocess`` strings, plus ``shutil.rmtree``
and file deletion; for ``write_file``, replacing a file that exists.

Commands are split with ``shlex`` (quotes respected, ``;``/``&&``/``|`` separating
commands) so ``echo "rm -rf /"`` is not a delete and ``2>&1`` is not an overwrite.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from mibyan_jupyter.jupyter.kernel_tools.notebook_risk import NOTEBOOK_EDITS, notebook_risk
from mibyan_jupyter.jupyter.kernel_tools.paths import PathOutsideRootError, inside
from mibyan_jupyter.jupyter.kernel_tools.text import human_size

_SEPARATORS = frozenset({";", ";;", "&", "&&", "|", "||", "|&", "(", ")", "{", "}"})
_WRAPPERS = frozenset(
    {"sudo", "doas", "nohup", "time", "nice", "exec", "command", "builtin", "xargs", "env"}
    | {"stdbuf", "timeout", "then", "do", "else", "elif", "if", "while", "until", "!", "$"}
)
_OVERWRITE = frozenset({">", ">|", "&>", "1>", "2>"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_SYSTEM_DIRS = frozenset(
    {"/", "/*", "~", "~/", "$HOME", "/etc", "/usr", "/bin", "/sbin", "/lib", "/var", "/boot"}
    | {"/home", "/root", "/opt"}
)
_RAW_RULES = (
    (re.compile(r"(\w+|:)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&"), "fork bomb"),
    (
        re.compile(r"\b(?:ba|z|da)?sh\b[^\n]*(?:<\(|\$\()\s*(?:curl|wget)\b"),
        "runs a downloaded script (sh <(curl ...))",
    ),
    (
        re.compile(r"\bdrop\s+(?:table|database|schema)\b", re.IGNORECASE),
        "drops a database table (DROP)",
    ),
)
_DOWNLOADERS = frozenset({"curl", "wget"})
_INTERPRETERS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "python", "python3", "perl"})
_PIPED_SCRIPT = "pipes a downloaded script into an interpreter (curl | sh)"
_PYTHON_RULES = (
    (re.compile(r"\bshutil\.rmtree\s*\("), "deletes a folder tree (shutil.rmtree)"),
    (
        re.compile(r"(?:\bos\.(?:remove|unlink|rmdir|removedirs)|\.unlink|\.rmdir)\s*\("),
        "deletes files (os.remove / Path.unlink)",
    ),
)
_PY_SHELL_CALL = re.compile(
    r"\b(?:os\.system|os\.popen|subprocess\.\w+|check_output|check_call|Popen)\s*\((.*)"
)
_PY_STRING = re.compile(r"""[rbuRBU]{0,2}(['"])(.*?)(?<!\\)\1""")
_CELL_SHELL = re.compile(r"^\s*%%(?:bash|sh|script)\b.*?\n(.*)", re.DOTALL)
_LINE_SHELL = re.compile(r"^\s*(?:!!?|%sx\b|%system\b)(.*)$", re.MULTILINE)


def risk_note(tool_name: str, args: Mapping[str, Any], *, root: Path | None = None) -> str | None:
    """A one-line warning about ``tool_name`` called with ``args``, or ``None``.

    ``root`` is the folder ``write_file`` paths are relative to (default: the current
    directory, which in a kernel is the notebook's folder)."""
    if tool_name in NOTEBOOK_EDITS:  # a diff or the code, not one line (notebook_risk.py)
        return notebook_risk(tool_name, args, code_reasons=python_reasons)
    reasons: list[str] = []
    if tool_name == "run_shell":
        reasons = shell_reasons(str(args.get("command", "")))
    elif tool_name == "run_python":
        reasons = python_reasons(str(args.get("code", "")))
    elif tool_name == "write_file" and args.get("overwrite"):
        reasons = _overwrite_reasons(str(args.get("path", "")), root or Path.cwd())
    reasons = list(dict.fromkeys(reasons))
    if not reasons:
        return None
    text = "; ".join(reasons[:4]) + ("; …" if len(reasons) > 4 else "")
    return text[0].upper() + text[1:]


def shell_reasons(command: str) -> list[str]:
    reasons = [text for pattern, text in _RAW_RULES if pattern.search(command)]
    previous: str | None = None
    for separator, words in _commands(command):
        wrapper_reasons, name, args = _program(words)
        reasons += wrapper_reasons
        if name is not None:
            if separator == "|" and previous in _DOWNLOADERS and name in _INTERPRETERS:
                reasons.append(_PIPED_SCRIPT)
            reasons += _program_reasons(name, args)
        reasons += _redirect_reasons(words)
        previous = name
    return reasons


def python_reasons(code: str) -> list[str]:
    reasons = [text for pattern, text in (*_RAW_RULES, *_PYTHON_RULES) if pattern.search(code)]
    shell_texts = [m.group(1) for m in _LINE_SHELL.finditer(code)]
    cell = _CELL_SHELL.match(code)
    if cell:
        shell_texts.append(cell.group(1))
    for call in _PY_SHELL_CALL.finditer(code):
        shell_texts.append(" ".join(s.group(2) for s in _PY_STRING.finditer(call.group(1))))
    for text in shell_texts:
        reasons += shell_reasons(text)
    return reasons


def _overwrite_reasons(path: str, root: Path) -> list[str]:
    try:
        target = inside(root, path)
    except PathOutsideRootError:
        return []  # the tool refuses it anyway
    if target.is_file():
        return [f"overwrites the existing file {path} ({human_size(target.stat().st_size)})"]
    return []


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: split roughly
        return re.findall(r"[;&|()<>]+|[^\s;&|()<>]+", line)


def _commands(command: str) -> Iterator[tuple[str, list[str]]]:
    """Each simple command's words (wrappers such as ``sudo`` or ``env X=1`` included),
    with the separator before it (``|``, ``&&``..., ``""`` at the start of a line)."""
    for line in command.splitlines():
        separator, words = "", list[str]()
        for token in _tokens(line):
            if token in _SEPARATORS:
                if words:
                    yield separator, words
                separator, words = token, list[str]()
            else:
                words.append(token)
        if words:
            yield separator, words


def _program(words: list[str]) -> tuple[list[str], str | None, list[str]]:
    """Reasons from the wrappers (``sudo``), then the program's name and its arguments."""
    reasons = []
    index = 0
    while index < len(words) and (
        words[index] in _WRAPPERS
        or re.fullmatch(r"\w+=.*", words[index])
        or (index and words[index].startswith("-"))
        or (index and words[index - 1] == "timeout")
    ):
        if words[index] in ("sudo", "doas"):
            reasons.append(f"runs as root ({words[index]})")
        index += 1
    if index >= len(words):
        return reasons, None, []
    return reasons, PurePosixPath(words[index]).name, words[index + 1 :]


def _flag(args: list[str], letter: str, long: str) -> bool:
    return any(
        a == long or (re.fullmatch(rf"-[a-zA-Z]*{letter}[a-zA-Z]*", a) is not None) for a in args
    )


def _program_reasons(name: str, args: list[str]) -> list[str]:
    recursive = _flag(args, "[rR]", "--recursive")
    git = args[0] if name == "git" and args else ""
    checks = [
        (name == "rm" and recursive, "deletes files recursively (rm -r)"),
        (name == "rm" and not recursive, "deletes files (rm)"),
        (name.startswith("mkfs"), "formats a file system (mkfs)"),
        (name in ("fdisk", "sfdisk", "parted", "wipefs"), f"repartitions or wipes a disk ({name})"),
        (name == "dd" and any(a.startswith("of=") for a in args), "writes raw data (dd of=)"),
        (
            name in ("chmod", "chown", "chgrp") and recursive and bool(_SYSTEM_DIRS & set(args)),
            f"changes permissions or owners recursively on a system folder ({name} -R)",
        ),
        (git == "reset" and "--hard" in args, "discards uncommitted changes (git reset --hard)"),
        (
            git == "clean" and _flag(args, "f", "--force"),
            "deletes untracked files (git clean -f)",
        ),
        (
            git == "push" and (_flag(args, "f", "--force") or "--force-with-lease" in args),
            "rewrites the remote history (git push --force)",
        ),
        (
            git in ("checkout", "restore") and "." in args,
            f"discards uncommitted changes (git {git} .)",
        ),
        (
            name in ("shutdown", "reboot", "halt", "poweroff")
            or (name == "init" and args[:1] in (["0"], ["6"]))
            or (name == "systemctl" and bool({"poweroff", "reboot", "halt"} & set(args))),
            "shuts down or reboots the machine",
        ),
        (
            name == "find" and ("-delete" in args or _find_exec_rm(args)),
            "deletes the files it finds (find -delete)",
        ),
        (name == "shred", "destroys file contents (shred)"),
        (name == "truncate", "truncates files (truncate)"),
        (name == "mv" and args[-1:] == ["/dev/null"], "moves files to /dev/null (deletes them)"),
        (name == "kill" and "-1" in args[1:], "kills all your processes (kill -1)"),
        (name in ("killall", "pkill"), f"kills processes by name ({name})"),
        (name == "crontab" and "-r" in args, "removes all cron jobs (crontab -r)"),
        (
            name == "rsync" and any(a.startswith("--delete") for a in args),
            "deletes files at the destination (rsync --delete)",
        ),
        (name == "su", "switches user (su)"),
    ]
    return [text for condition, text in checks if condition]


def _find_exec_rm(args: list[str]) -> bool:
    return any(
        a in ("-exec", "-execdir", "-ok") and args[i + 1 : i + 2] == ["rm"]
        for i, a in enumerate(args)
    )


def _redirect_reasons(words: list[str]) -> list[str]:
    reasons = []
    for operator, target in itertools.pairwise(words):
        if operator not in _OVERWRITE or target in _HARMLESS_TARGETS:
            continue
        if target.startswith("/dev/"):
            reasons.append(f"writes to a device ({target})")
        else:
            reasons.append(f"overwrites {target} (> redirection)")
    return reasons

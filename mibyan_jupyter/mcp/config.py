"""Where MCP servers are configured, and how the files are read (Claude Desktop's shape).

Two files, one shape (``{"mcpServers": {NAME: {...}}}``, as Claude Desktop and
notebook-intelligence write it):

* the user's, ``<jupyter config dir>/mibyan/mcp.json``: trusted, since only the user
  writes there; ``%agent mcp add|remove|enable|disable`` edit it;
* the notebook folder's, ``<folder>/.jupyter/mcp.json``: one file, in the folder Jupyter
  already uses for per-project settings (jupyter-ai 3 keeps ``.jupyter/mcp_settings.json``
  there), out of the way of the notebooks. Only one, so a folder has one trust decision
  (``trust.py``: a folder's file starts commands, so it is used only once trusted).

Merge rule: a name in both files is the user's server, and the folder's entry is skipped
with one line. A folder may add servers but never replace one the user configured: an
approval rule is kept per tool name (``NAME__tool``), so a cloned repository that redefined
``github`` would inherit every "always allow" given to the user's server.

A bad file or entry never stops the others: each problem is one line naming the file and
the key (:attr:`McpConfig.problems`), and the rest loads. Secrets stay as written:
``${VAR}`` references are resolved only when a server starts (``spec.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mibyan_jupyter.mcp.spec import DEFAULT_TIMEOUT_S, McpConfigError, ServerSpec

FILE_NAME = "mcp.json"
KEY = "mcpServers"
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}"
"""A server's name: it prefixes its tools' names (``NAME__tool``, at most 64 characters)."""
MAX_TIMEOUT_S = 3600.0


class ServerEntry(BaseModel):
    """One ``mcpServers`` entry as written; unknown keys are refused (a typo would silently
    drop a setting, e.g. ``"disable": true`` starting a server the user meant to turn off)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["stdio", "http", "streamable-http", "streamableHttp"] | None = None
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    disabled: bool = False
    timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)

    @model_validator(mode="after")
    def _one_transport(self) -> ServerEntry:
        http = self.url is not None or self.type not in (None, "stdio")
        if http and self.command is not None:
            raise ValueError("give either command (stdio) or url (HTTP), not both")
        if http and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        if not http and self.command is None:
            raise ValueError("needs command (a stdio server) or url (Streamable HTTP)")
        if http and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for stdio servers (command), not url")
        if not http and self.headers:
            raise ValueError("headers are for HTTP servers (url), not command")
        return self

    def spec(self, name: str, source: Path, base: Path | None) -> ServerSpec:
        """The runtime's record; a relative ``cwd`` is the file's folder's (``base``)."""
        if self.url is not None:
            return ServerSpec(
                name=name,
                transport="http",
                url=self.url,
                headers=dict(self.headers),
                disabled=self.disabled,
                timeout=self.timeout,
                source=str(source),
            )
        cwd = self.cwd
        if base is not None:
            cwd = str(base / cwd) if cwd is not None else str(base)
        return ServerSpec(
            name=name,
            transport="stdio",
            command=self.command,
            args=tuple(self.args),
            env=dict(self.env),
            cwd=cwd,
            disabled=self.disabled,
            timeout=self.timeout,
            source=str(source),
        )


def user_config_path() -> Path:
    """``<jupyter config dir>/mibyan/mcp.json`` (``$JUPYTER_CONFIG_DIR`` moves it)."""
    try:
        from jupyter_core.paths import jupyter_config_dir

        base = Path(jupyter_config_dir())
    except ImportError:
        base = Path.home() / ".jupyter"
    return base / "mibyan" / FILE_NAME


def folder_config_path(folder: Path) -> Path:
    """The folder's one file, ``<folder>/.jupyter/mcp.json``."""
    return Path(folder).resolve() / ".jupyter" / FILE_NAME


@dataclass(frozen=True)
class McpConfig:
    """Every configured server by name (the user's first, then the folder's, whether the
    folder's file is trusted or not, disabled ones included) and the problems found."""

    servers: dict[str, ServerSpec] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    folder_file: Path | None = None
    """The folder's file when it exists (its servers need trust before they start)."""
    folder_digest: str | None = None
    """The sha256 of the folder file's bytes that were parsed: what trust is given to."""

    def from_folder(self, name: str) -> bool:
        spec = self.servers.get(name)
        return (
            spec is not None
            and self.folder_file is not None
            and (spec.source == str(self.folder_file))
        )


def read_file(path: Path, *, base: Path | None = None) -> tuple[dict[str, ServerSpec], list[str]]:
    """The servers of one file and one line per problem; a missing file has neither.
    ``base``: the folder a stdio server of this file starts in (relative ``cwd`` too)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, []
    except OSError as error:
        return {}, [f"{path}: cannot be read ({error}); its servers are skipped"]
    return parse_document(path, data, base)


def parse_document(
    path: Path, data: bytes, base: Path | None = None
) -> tuple[dict[str, ServerSpec], list[str]]:
    """:func:`read_file` of bytes already read (the trust check hashes the same bytes)."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return {}, [f"{path}: cannot be read as JSON ({error}); its servers are skipped"]
    entries = raw.get(KEY) if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        return {}, [f'{path}: needs an object {{"{KEY}": {{NAME: {{...}}}}}}; nothing loaded']
    servers: dict[str, ServerSpec] = {}
    problems: list[str] = []
    for name, entry in entries.items():
        try:
            servers[name] = parse_entry(name, entry, path, base)
        except McpConfigError as error:
            problems.append(str(error))
    return servers, problems


def parse_entry(name: str, entry: Any, path: Path, base: Path | None = None) -> ServerSpec:
    """One entry as a :class:`ServerSpec`; raises :class:`McpConfigError` in one line
    naming the file, the key and what to write instead."""
    where = f"{path}: {KEY}.{name}"
    if not re.fullmatch(NAME_PATTERN, name):
        raise McpConfigError(
            f"{where}: a server's name is 1-40 letters, digits, '_' or '-' (it prefixes "
            "its tools' names); skipped"
        )
    try:
        return ServerEntry.model_validate(entry).spec(name, path, base)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        key = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise McpConfigError(f"{where}{'.' + key if key else ''}: {message}; skipped") from None


def load_config(folder: Path | None = None, *, user_file: Path | None = None) -> McpConfig:
    """The user's servers and, with ``folder``, the folder's (see the merge rule above)."""
    user_path = user_file if user_file is not None else user_config_path()
    servers, problems = read_file(user_path)
    folder_file: Path | None = None
    folder_digest: str | None = None
    if folder is not None:
        candidate = folder_config_path(folder)
        try:
            data = candidate.read_bytes()
        except OSError:
            data = None
        if data is not None:
            folder_file, folder_digest = candidate, hashlib.sha256(data).hexdigest()
            found, more = parse_document(candidate, data, base=Path(folder).resolve())
            problems += more
            for name, spec in found.items():
                if name in servers:
                    problems.append(
                        f"{candidate}: {KEY}.{name} is also in {user_path}; the user's "
                        "server is used (a folder adds servers, it never replaces yours)"
                    )
                else:
                    servers[name] = spec
    return McpConfig(servers, tuple(problems), folder_file, folder_digest)


def starts(spec: ServerSpec) -> str:
    """What a server is, in one line for the user: the command it starts or the URL it
    calls, with ``${VAR}`` kept as written and anything secret-looking redacted."""
    from mibyan_jupyter.secrets import REDACT

    if spec.transport == "http":
        return REDACT(str(spec.url))
    import shlex

    return REDACT(shlex.join([str(spec.command), *spec.args]))


def edit_user_file(change: Callable[[dict[str, Any]], None], path: Path | None = None) -> Path:
    """Apply ``change`` to the ``mcpServers`` object of the user's file and write it back
    atomically (a new file is owner-only: it may hold a literal secret). Every other key
    of the file is kept. Raises :class:`McpConfigError` when the file cannot be read."""
    path = path if path is not None else user_config_path()
    document: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise McpConfigError(
                f"{path}: cannot be read as JSON ({error}); fix it first"
            ) from None
        if not isinstance(loaded, dict) or not isinstance(loaded.get(KEY, {}), dict):
            raise McpConfigError(f'{path}: needs an object {{"{KEY}": {{...}}}}; fix it first')
        document = loaded
    servers = document.setdefault(KEY, {})
    change(servers)
    write_private(path, json.dumps(document, indent=2) + "\n")
    return path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping an existing file's mode, else 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

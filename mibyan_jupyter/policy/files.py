"""Where the admin policy lives, whether it can be trusted, and reading it.

The threat model (docs/architecture.md, "Admin policy"): a student controls their kernel's
environment variables and every file they own. So:

* **The path is fixed**: ``mibyan/policy.toml`` under each of jupyter_core's
  ``SYSTEM_CONFIG_PATH`` folders (``/usr/local/etc/jupyter``, ``/etc/jupyter`` on Linux);
  every one that exists is read. No environment variable moves it.
* ``MIBYAN_POLICY`` may only **add** one file (tests, a course's extra rules). It passes the
  same checks, and the two are combined strictest-wins (:func:`.model.strictest`), so adding
  a file can never loosen the system policy and removing the variable only removes the
  addition.
* **A file the user could write is refused**: the file (after following links) must be
  owned by root and not group- or other-writable, and so must every folder above it (a
  sticky folder such as ``/tmp`` is accepted: others cannot rename what root owns there).
* **Refused or invalid means the agent is off** (fail closed), with one line per problem:
  a policy that cannot be trusted is treated like an exam, never like no policy.

Reading costs a few ``stat`` calls per cell: the parsed result is kept until a file's
inode, size, mtime, owner or mode changes.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from mibyan_jupyter.policy.model import AdminPolicy, ValidationError, error_lines, strictest

ENV_POLICY = "MIBYAN_POLICY"
TRUSTED_UID = 0
POLICY_NAME = Path("mibyan") / "policy.toml"


def system_paths() -> list[Path]:
    """The fixed places of the admin policy (jupyter_core's system config folders)."""
    from jupyter_core.paths import SYSTEM_CONFIG_PATH

    return [Path(folder) / POLICY_NAME for folder in SYSTEM_CONFIG_PATH]


@dataclass(frozen=True)
class LoadedPolicy:
    """The policy in force. ``policy`` ``None``: no policy file, nothing is restricted."""

    policy: AdminPolicy | None = None
    sources: tuple[str, ...] = ()
    digest: str = ""
    """SHA-256 of the files' bytes, in order: an admin's change shows as a new digest."""
    problems: tuple[str, ...] = field(default=())
    """Non-empty: the policy cannot be trusted or read, and the agent is off."""


def unsafe_reason(path: Path) -> str | None:
    """Why the user could write ``path`` (``None``: only root can)."""
    real = Path(os.path.realpath(path))
    try:
        info = real.stat()
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_uid != TRUSTED_UID:
        return f"is owned by uid {info.st_uid}, not root"
    if info.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    for folder in real.parents:
        try:
            meta = folder.stat()
        except OSError as error:
            return f"its folder {folder} cannot be read ({error.strerror})"
        if meta.st_uid != TRUSTED_UID:
            return f"its folder {folder} is owned by uid {meta.st_uid}, not root"
        if meta.st_mode & 0o022 and not meta.st_mode & stat.S_ISVTX:
            return (
                f"its folder {folder} is writable by others (mode {stat.S_IMODE(meta.st_mode):o})"
            )
    return None


def _candidates() -> list[Path]:
    paths = [p for p in system_paths() if os.path.lexists(p)]
    extra = os.environ.get(ENV_POLICY, "").strip()
    if extra:
        paths.append(Path(extra).expanduser())  # a missing added file is a problem, below
    return paths


def _signature(paths: list[Path]) -> tuple[object, ...]:
    out: list[object] = []
    for path in paths:
        try:
            s = os.stat(path)
            out.append((str(path), s.st_ino, s.st_size, s.st_mtime_ns, s.st_uid, s.st_mode))
        except OSError:
            out.append((str(path), None))
    return tuple(out)


_cache: tuple[tuple[object, ...], LoadedPolicy] | None = None


def load_policy() -> LoadedPolicy:
    """The policy in force now (cached until a policy file changes)."""
    global _cache
    paths = _candidates()
    signature = _signature(paths)
    if _cache is not None and _cache[0] == signature:
        return _cache[1]
    loaded = read_policy(paths)
    _cache = (signature, loaded)
    return loaded


def read_policy(paths: list[Path]) -> LoadedPolicy:
    """Check, parse and combine ``paths`` (every problem one line; any problem: fail closed)."""
    problems: list[str] = []
    combined: AdminPolicy | None = None
    digest = hashlib.sha256()
    for path in paths:
        reason = unsafe_reason(path)
        if reason is not None:
            problems.append(f"the admin policy {path} {reason}")
            continue
        try:
            data = path.read_bytes()
            parsed = AdminPolicy.model_validate(tomllib.loads(data.decode("utf-8")))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            problems.append(f"the admin policy {path} cannot be read: {error}")
            continue
        except ValidationError as error:
            problems += error_lines(error, str(path))
            continue
        digest.update(data)
        combined = parsed if combined is None else strictest(combined, parsed)
    if problems:
        return LoadedPolicy(AdminPolicy(), tuple(map(str, paths)), "", tuple(problems))
    if combined is None:
        return LoadedPolicy()
    return LoadedPolicy(combined, tuple(map(str, paths)), digest.hexdigest())

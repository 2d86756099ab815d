"""Where the admin policy is read from and when it is refused: a file the user could
write (not root's, writable by others, in a folder others can write) is a problem, and a
problem turns the agent off (fail closed). ``MIBYAN_POLICY`` only adds a file.

Ownership means something only when the test runs as root (it can then make files that
belong to another uid); the refusals that need root are skipped otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mibyan_jupyter.policy import files
from mibyan_jupyter.policy.files import ENV_POLICY, load_policy, read_policy, unsafe_reason

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as others")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "etc"
    made.mkdir(mode=0o755)
    made.chmod(0o755)
    return made


def write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


@AS_ROOT
def test_a_root_owned_file_is_trusted_and_read(folder: Path) -> None:
    path = write(folder / "policy.toml", '[exam]\nenabled = true\nmessage = "No AI today."\n')
    assert unsafe_reason(path) is None
    loaded = read_policy([path])
    assert loaded.problems == ()
    assert loaded.policy is not None
    assert loaded.policy.exam.message == "No AI today."
    assert len(loaded.digest) == 64


@AS_ROOT
def test_a_file_another_user_owns_is_refused(folder: Path) -> None:
    path = write(folder / "policy.toml", "")
    os.chown(path, 1000, 1000)
    assert unsafe_reason(path) == "is owned by uid 1000, not root"
    loaded = read_policy([path])
    assert loaded.problems == (f"the admin policy {path} is owned by uid 1000, not root",)


@AS_ROOT
def test_a_file_others_can_write_is_refused(folder: Path) -> None:
    path = write(folder / "policy.toml", "", mode=0o666)
    assert unsafe_reason(path) == "is writable by group or others (mode 666)"


@AS_ROOT
def test_a_folder_others_can_write_is_refused_unless_sticky(folder: Path) -> None:
    path = write(folder / "policy.toml", "")
    folder.chmod(0o777)
    assert unsafe_reason(path) == f"its folder {folder} is writable by others (mode 777)"
    folder.chmod(0o1777)  # like /tmp: others cannot rename what root owns there
    assert unsafe_reason(path) is None


@AS_ROOT
def test_a_link_is_judged_by_the_file_it_points_to(folder: Path, tmp_path: Path) -> None:
    target = write(tmp_path / "user-file.toml", "")
    os.chown(target, 1000, 1000)
    link = folder / "policy.toml"
    link.symlink_to(target)
    assert unsafe_reason(link) == "is owned by uid 1000, not root"


def test_a_missing_added_file_and_bad_toml_are_problems(folder: Path) -> None:
    missing = folder / "nope.toml"
    assert "cannot be read" in (unsafe_reason(missing) or "")
    if os.geteuid() == 0:
        bad = write(folder / "bad.toml", "[exam\n")
        (problem,) = read_policy([bad]).problems
        assert problem.startswith(f"the admin policy {bad} cannot be read: ")


@AS_ROOT
def test_the_environment_only_adds_a_file_and_cannot_loosen(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = write(folder / "system.toml", '[tools]\ndisabled = ["shell"]\n')
    added = write(folder / "added.toml", '[tools]\ndisabled = ["files"]\n')
    monkeypatch.setattr(files, "system_paths", lambda: [system])
    monkeypatch.setenv(ENV_POLICY, str(added))
    loaded = load_policy()
    assert loaded.policy is not None
    assert set(loaded.policy.tools.disabled) == {"shell", "files"}
    monkeypatch.delenv(ENV_POLICY)  # removing the variable removes only the addition
    loaded = load_policy()
    assert loaded.policy is not None
    assert loaded.policy.tools.disabled == ("shell",)


@AS_ROOT
def test_a_changed_file_is_read_again(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(folder / "policy.toml", "[exam]\nenabled = false\n")
    monkeypatch.setattr(files, "system_paths", lambda: [path])
    monkeypatch.delenv(ENV_POLICY, raising=False)
    first = load_policy()
    assert first is load_policy()  # cached while nothing changed
    write(path, "[exam]\nenabled = true\n")
    os.utime(path, ns=(1, 1))  # a different mtime even within one clock tick
    second = load_policy()
    assert second.policy is not None
    assert second.policy.exam.enabled
    assert second.digest != first.digest


def test_no_policy_file_means_no_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(files, "system_paths", lambda: [tmp_path / "absent.toml"])
    monkeypatch.delenv(ENV_POLICY, raising=False)
    loaded = load_policy()
    assert loaded.policy is None
    assert loaded.problems == ()


def test_the_system_paths_are_jupyters_system_config_folders() -> None:
    from jupyter_core.paths import SYSTEM_CONFIG_PATH

    assert files.system_paths() == [Path(p) / "mibyan" / "policy.toml" for p in SYSTEM_CONFIG_PATH]

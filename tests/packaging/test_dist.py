"""What the built distributions carry: run by ``make dist`` on what it just built.

``make dist`` (tests/packaging/build_dist.sh) builds, in a fresh copy of the repository, a
wheel from the checkout (the build hook builds the front-end extension there), an sdist, and
a wheel from that sdist with a ``node`` on PATH that fails and records every call. It then
runs this file with ``MIBYAN_DIST`` naming its output folder. Building reaches PyPI and the
npm registry and takes one to two minutes, so ``make test`` does not build and leaves these
out (marker ``dist``); run alone without ``MIBYAN_DIST`` they skip, and under
``MIBYAN_NO_SKIP=1`` (as ``make dist`` runs them) a missing build is a failure.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.dist]

REPO = Path(__file__).resolve().parents[2]
EXTENSION = "share/jupyter/labextensions/mibyan-jupyter"
SERVER_CONFIG = "jupyter_server_config.d/mibyan_jupyter.json"
VIEW_STATIC = "mibyan_jupyter/jupyter/view/static"


def _dist() -> Path:
    value = os.environ.get("MIBYAN_DIST")
    if not value:
        message = "make dist builds the distributions and runs these (MIBYAN_DIST unset)"
        if os.environ.get("MIBYAN_NO_SKIP") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return Path(value)


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {folder}, found {found}"
    return found[0]


def _wheel(kind: str) -> dict[str, bytes]:
    with zipfile.ZipFile(_one(_dist() / kind, "*.whl")) as wheel:
        return {name: wheel.read(name) for name in wheel.namelist()}


def _data(files: dict[str, bytes]) -> str:
    """The wheel's ``<name>-<version>.data/data/`` prefix (what pip installs into the env)."""
    prefixes = {name.split("/data/", 1)[0] for name in files if ".data/data/" in name}
    assert len(prefixes) == 1, prefixes
    return prefixes.pop() + "/data/"


def _sdist() -> dict[str, bytes]:
    """The sdist's files, named without their ``<name>-<version>/`` folder."""
    with tarfile.open(_one(_dist() / "sdist", "*.tar.gz")) as sdist:
        files = {}
        for member in sdist.getmembers():
            handle = sdist.extractfile(member) if member.isfile() else None
            if handle is not None:
                files[member.name.split("/", 1)[1]] = handle.read()
    return files


def _extension_files(files: dict[str, bytes], prefix: str) -> dict[str, bytes]:
    return {name[len(prefix) :]: body for name, body in files.items() if name.startswith(prefix)}


@pytest.mark.parametrize("kind", ["checkout", "from-sdist"])
def test_wheel_installs_the_built_extension(kind: str) -> None:
    """JupyterLab finds a prebuilt extension in share/jupyter/labextensions/<name>/: its
    package.json names the remoteEntry bundle to load, and that bundle is there."""
    files = _wheel(kind)
    extension = _extension_files(files, _data(files) + EXTENSION + "/")
    meta = json.loads(extension["package.json"])
    assert meta["name"] == "mibyan-jupyter"
    load = meta["jupyterlab"]["_build"]["load"]
    assert re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", load), load
    assert load in extension
    assert [n for n in extension if re.fullmatch(r"static/remoteEntry\..*\.js", n)] == [load]
    assert "static/style.js" in extension
    install = json.loads(extension["install.json"])
    assert install["packageManager"] == "python"
    assert install["packageName"] == "mibyan_jupyter"


def test_wheel_from_the_sdist_needed_no_node_and_matches() -> None:
    """The sdist carries the prebuilt extension, so its wheel was built without Node.js (the
    failing ``node`` build_dist.sh puts first on PATH was never called) and installs the
    same extension, byte for byte, as the wheel built from the checkout."""
    assert not (_dist() / "node-calls").exists(), (_dist() / "node-calls").read_text()
    checkout, from_sdist = _wheel("checkout"), _wheel("from-sdist")
    ext_a = _extension_files(checkout, _data(checkout) + EXTENSION + "/")
    ext_b = _extension_files(from_sdist, _data(from_sdist) + EXTENSION + "/")
    assert ext_a == ext_b
    assert sorted(checkout) == sorted(from_sdist)


def test_sdist_carries_the_prebuilt_extension_and_no_build_junk() -> None:
    files = _sdist()
    built = _extension_files(files, "mibyan_jupyter/labextension/")
    load = json.loads(built["package.json"])["jupyterlab"]["_build"]["load"]
    assert load in built
    for needed in (
        "pyproject.toml",
        "labextension/install.json",
        "labextension/build.sh",
        "labextension/hatch_build.py",
        "labextension/package.json",
        "labextension/yarn.lock",
    ):
        assert needed in files, needed
    junk = [n for n in files if re.match(r"labextension/(node_modules|\.yarn|lib)/", n)]
    assert junk == []


def test_wheel_carries_every_package_file_of_the_sdist() -> None:
    """Everything under mibyan_jupyter/ in the sdist (modules, the view's static files, the
    store's migrations, the built extension) is in the wheel, unchanged."""
    sdist, wheel = _sdist(), _wheel("checkout")
    package = {n: b for n, b in sdist.items() if n.startswith("mibyan_jupyter/")}
    missing = sorted(n for n in package if wheel.get(n) != package[n])
    assert missing == []
    for name in ("view.js", "cards.js", "markdown.js", "dom.js", "view.css", "ops.d.ts"):
        assert f"{VIEW_STATIC}/{name}" in wheel
    migrations = [
        n for n in wheel if re.fullmatch(r"mibyan_jupyter/store/migrations/\d{4}_.*\.sql", n)
    ]
    assert len(migrations) >= 4
    assert "mibyan_jupyter/store/migrations/0001_init.sql" in migrations


def test_wheel_enables_the_server_extension() -> None:
    """The wheel installs jupyter-config/'s server config into etc/jupyter/ (where
    jupyter_server reads it), and the sdist carries the source file."""
    source = REPO / "jupyter-config" / SERVER_CONFIG
    if not source.exists():
        pytest.skip(f"no {source.relative_to(REPO)} in this checkout yet")
    sdist, wheel = _sdist(), _wheel("checkout")
    assert sdist["jupyter-config/" + SERVER_CONFIG] == source.read_bytes()
    installed = wheel[_data(wheel) + "etc/jupyter/" + SERVER_CONFIG]
    assert installed == source.read_bytes()
    enabled = json.loads(installed)["ServerApp"]["jpserver_extensions"]
    assert [name for name, on in enabled.items() if on and name.startswith("mibyan_jupyter")]

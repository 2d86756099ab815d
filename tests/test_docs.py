"""docs/architecture.md stays true to the tree, and the code cites it, never a design file
outside the repository (a comment pointing at a file nobody who clones the project has is a
dead link)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "mibyan_jupyter"
BUILT = PACKAGE / "labextension"
"""The built front-end extension (bundled, generated, rebuilt under a running suite): not ours
to cite anything."""
SOURCES = [
    *PACKAGE.rglob("*.py"),
    *(p for p in PACKAGE.rglob("*.js") if BUILT not in p.parents),
    *(p for p in PACKAGE.rglob("*.ts") if BUILT not in p.parents),
    *(ROOT / "labextension" / "src").rglob("*.ts"),
    *(ROOT / "bench").glob("*.py"),
    *(ROOT / "tests").rglob("*.py"),
    ROOT / "Makefile",
    ROOT / "README.md",
]
PATH_LIKE = re.compile(r"`([a-z_]+(?:/[a-z_.]+)+/?)`")
SECTION = re.compile(r'docs/architecture\.md, "([^"]+)"')


def _headings() -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in ARCHITECTURE.read_text().splitlines()
        if line.startswith("## ")
    }


def test_every_path_the_architecture_names_exists() -> None:
    missing = []
    for name in PATH_LIKE.findall(ARCHITECTURE.read_text()):
        if not ((PACKAGE / name).exists() or (ROOT / name).exists()):
            missing.append(name)
    assert missing == []


def test_code_cites_sections_that_exist() -> None:
    headings = _headings()
    cited: dict[str, set[str]] = {}
    for path in SOURCES:
        for section in SECTION.findall(path.read_text(errors="replace")):
            # a citation wrapped over two lines of a docstring or a comment
            section = " ".join(re.sub(r"\n\s*(#|//|\*)?", " ", section).split())
            cited.setdefault(section, set()).add(str(path.relative_to(ROOT)))
    assert cited, "nothing cites docs/architecture.md"
    unknown = {section: files for section, files in cited.items() if section not in headings}
    assert unknown == {}


def test_nothing_cites_a_design_file_outside_the_repository() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in SOURCES
        if path != Path(__file__) and re.search(r"DESIGN(\.md)?\b", path.read_text())
    ]
    assert offenders == []

#!/usr/bin/env bash
# Copy the repository into DEST as a fresh clone of it would be, with the working changes:
# every file git tracks or would track (tracked, and untracked but not ignored), as the work
# tree has it now. Nothing git ignores comes along (.venv, node_modules, labextension/.yarn,
# the built extension in mibyan_jupyter/labextension), so a build in the copy starts from
# what `git clone` gives. Used by make dist and make binder-check.
#
# Usage: tests/packaging/clean_copy.sh DEST   (DEST is replaced)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${1:?usage: clean_copy.sh DEST}"
rm -rf "$dest"
mkdir -p "$dest"
cd "$repo"
# A tracked file deleted in the work tree is listed by ls-files but left out here.
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done \
  | tar --null --no-recursion -T - -cf - \
  | tar -xf - -C "$dest"

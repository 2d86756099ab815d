#!/usr/bin/env bash
# make binder-check: build the Binder environment the way repo2docker does, as closely as this
# machine allows (no Docker here), and check it works:
#
#   1. the repository as repo2docker gets it: a fresh copy (tests/packaging/clean_copy.sh);
#   2. a fresh venv on the Python that binder/runtime.txt names (`python-3.11` -> python3.11);
#   3. `pip install -r binder/requirements.txt`, then `binder/postBuild`, from the copy's root,
#      with a fresh HOME (repo2docker's user starts with an empty one) and no API keys;
#   4. `jupyter labextension list` shows mibyan-jupyter enabled and OK, and
#      `jupyter server extension list` shows the server extension enabled and OK (when the
#      repository ships its config in jupyter-config/);
#   5. every notebook under notebooks/ executes with nbclient (the demo model answers:
#      `python -m mibyan_jupyter.quickstart NOTEBOOK`).
#
# What differs from mybinder.org: the base image (repo2docker's conda env brings Python 3.11 and
# Node.js 20.19 from conda-forge; here python3.11 and the system's Node.js), and pip may use this
# machine's wheel cache for binder/requirements.txt. Reaches PyPI and the npm registry.
#
# Usage: tests/packaging/binder_check.sh [WORK]   (default: build/binder-check; replaced)
# SOURCE_TREE=DIR checks DIR (a prepared tree without ignored files) instead of the work tree.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${1:-$repo/build/binder-check}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
started=$SECONDS
step() { echo "binder-check [$((SECONDS - started)) s] $*"; }
# Jupyter colours "enabled" and "OK"; the checks read the text without the colour codes.
plain() { sed "s/\x1b\[[0-9;]*m//g"; }

runtime="$(tr -d '[:space:]' <"$repo/binder/runtime.txt")"
if [[ ! $runtime =~ ^python-(3\.[0-9]+)$ ]]; then
  echo "binder-check: binder/runtime.txt must say python-3.X (repo2docker's format), not '$runtime'" >&2
  exit 1
fi
python="python${BASH_REMATCH[1]}"
command -v "$python" >/dev/null || { echo "binder-check: $python not found" >&2; exit 1; }

step "copy the repository"
rm -rf "${work:?}/repo" "${work:?}/venv" "${work:?}/home" "${work:?}/run"
if [[ -n ${SOURCE_TREE:-} ]]; then  # another tree to check (a prepared copy), copied as is
  cp -a "$SOURCE_TREE" "$work/repo"
else
  bash "$repo/tests/packaging/clean_copy.sh" "$work/repo"
fi
step "fresh venv on $("$python" --version)"
"$python" -m venv "$work/venv"

mkdir -p "$work/home"
# pip keeps this machine's wheel cache (postBuild's own install uses none, as on Binder).
cache="${PIP_CACHE_DIR:-$("$python" -m pip cache dir 2>/dev/null || echo "$work/pip-cache")}"
# What the container has: the venv first on PATH, an empty HOME, no provider keys.
export HOME="$work/home" PATH="$work/venv/bin:$PATH" PIP_CACHE_DIR="$cache"
unset VIRTUAL_ENV JUPYTER_PATH JUPYTER_CONFIG_DIR JUPYTER_DATA_DIR
for name in $(compgen -e); do
  if [[ $name =~ _(API_KEY|TOKEN)$ || $name == MIBYAN_* ]]; then unset "$name"; fi
done

cd "$work/repo"
step "pip install -r binder/requirements.txt"
python -m pip install -q -r binder/requirements.txt >"$work/requirements.log" 2>&1 \
  || { cat "$work/requirements.log" >&2; exit 1; }
step "binder/postBuild"
bash binder/postBuild >"$work/postBuild.log" 2>&1 || { cat "$work/postBuild.log" >&2; exit 1; }

step "jupyter labextension list"
jupyter labextension list 2>&1 | plain >"$work/labextensions.txt"
if ! grep -Eq 'mibyan-jupyter v[0-9.]+ enabled +OK' "$work/labextensions.txt"; then
  cat "$work/labextensions.txt" >&2
  echo "binder-check: the mibyan-jupyter lab extension is not enabled and OK" >&2
  exit 1
fi
if [[ -f jupyter-config/jupyter_server_config.d/mibyan_jupyter.json ]]; then
  step "jupyter server extension list"
  jupyter server extension list 2>&1 | plain >"$work/serverextensions.txt"
  if ! grep -Eq 'mibyan_jupyter[.a-z_]* +enabled' "$work/serverextensions.txt" \
    || ! grep -Eq 'mibyan_jupyter[.a-z_]* +[0-9.]* *OK' "$work/serverextensions.txt"; then
    cat "$work/serverextensions.txt" >&2
    echo "binder-check: the mibyan_jupyter server extension is not enabled and OK" >&2
    exit 1
  fi
fi

shopt -s nullglob
notebooks=(notebooks/*.ipynb)
[[ ${#notebooks[@]} -gt 0 ]] || { echo "binder-check: no notebooks under notebooks/" >&2; exit 1; }
for notebook in "${notebooks[@]}"; do
  name="$(basename "$notebook" .ipynb)"
  step "execute $notebook"
  if ! python -m mibyan_jupyter.quickstart "$notebook" --workdir "$work/run/$name" \
    >"$work/$name.log" 2>&1; then
    tail -40 "$work/$name.log" >&2
    echo "binder-check: $notebook failed (log: $work/$name.log)" >&2
    exit 1
  fi
done
step "ok: ${#notebooks[@]} notebooks executed, the extension is enabled (logs in $work)"

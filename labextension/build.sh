#!/usr/bin/env bash
# Build the JupyterLab extension into mibyan_jupyter/labextension/ (where the wheel and
# `jupyter-builder develop` pick it up).
#
# Usage: labextension/build.sh [VENV_BIN]   (default: .venv/bin of the repository)
#
# VENV_BIN must hold jlpm and jupyter-builder (both come with jupyterlab >= 4.6). Node ^20.19
# or >= 22.12 (what @rspack/core 2, used by @jupyter/builder, requires) must be on PATH. The npm
# registry is reached only when node_modules is missing or out of date; packages are cached in
# labextension/.yarn/cache, so nothing lands outside the repo.
#
# It also type-checks the live view's front end (mibyan_jupyter/jupyter/view/static/view.js,
# shipped as is, not bundled) against ops.d.ts, the mirror of the kernel's op types, with
# `tsc -p tsconfig.view.json`: a type error there fails the build.
#
# A second run is fast: `jlpm install` is skipped while package.json, yarn.lock and .yarnrc.yml
# hash the same as at the last install, the view check while its files hash the same as at
# the last passing check, and `jlpm build` while the sources hash the same as at the last
# build and the built extension is still in place.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
bin="${1:-$repo/.venv/bin}"
bin="$(cd "$bin" && pwd)"
out="$repo/mibyan_jupyter/labextension"

for tool in "$bin/jlpm" "$bin/jupyter-builder"; do
  if [[ ! -x "$tool" ]]; then
    echo "build.sh: $tool not found (install jupyterlab>=4.6 there)" >&2
    exit 1
  fi
done
if ! node -e '
  const [major, minor] = process.versions.node.split(".").map(Number);
  const ok = (major === 20 && minor >= 19) || (major === 22 && minor >= 12) || major > 22;
  process.exit(ok ? 0 : 1);
' 2>/dev/null; then
  echo "build.sh: needs Node ^20.19 or >= 22.12 on PATH (found: $(node --version 2>&1))" >&2
  exit 1
fi

export PATH="$bin:$PATH"
export YARN_ENABLE_PROGRESS_BARS=false YARN_ENABLE_TELEMETRY=0 YARN_ENABLE_INLINE_BUILDS=false
cd "$here"

# Hash of the given files and of every file under the given folders, in a stable order.
fingerprint() {
  find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}

# Run a step with its output in a log, shown only when the step fails.
quiet() {
  local log
  log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "build.sh: '$*' failed" >&2
    exit 1
  fi
  rm -f "$log"
}

install_stamp=node_modules/.mibyan-install-stamp
install_inputs="package.json yarn.lock .yarnrc.yml"
if [[ ! -f $install_stamp || "$(cat "$install_stamp")" != "$(fingerprint $install_inputs)" ]]; then
  echo "build.sh: jlpm install"
  # The committed yarn.lock pins every version; --immutable refuses to drift from it.
  if [[ -s yarn.lock ]]; then
    quiet jlpm install --immutable
  else
    quiet jlpm install
  fi
  fingerprint $install_inputs >"$install_stamp"
fi

view_stamp=node_modules/.mibyan-view-check-stamp
view_static="$repo/mibyan_jupyter/jupyter/view/static"
view_inputs="$(fingerprint "$view_static" tsconfig.view.json yarn.lock)"
if [[ ! -f $view_stamp || "$(cat "$view_stamp")" != "$view_inputs" ]]; then
  echo "build.sh: type-check the view (tsc -p tsconfig.view.json)"
  quiet node node_modules/typescript/bin/tsc -p tsconfig.view.json
  echo "$view_inputs" >"$view_stamp"
fi

build_stamp=lib/.mibyan-build-stamp
sources="$(fingerprint src style package.json tsconfig.json yarn.lock)"
load="$(node -e 'try { console.log(require(process.argv[1]).jupyterlab._build.load) } catch { }' \
  "$out/package.json")"
if [[ -z $load || ! -f "$out/$load" || ! -f $build_stamp || "$(cat "$build_stamp")" != "$sources" ]]
then
  echo "build.sh: jlpm build"
  # Old hashed bundles would otherwise pile up in the package (and the wheel).
  rm -rf "$out"
  quiet jlpm build
  echo "$sources" >"$build_stamp"
fi
echo "build.sh: extension ready in ${out#"$repo"/}"

#!/usr/bin/env bash
# make dist: build the sdist and the wheels the way a user or an index would, in a fresh copy
# of the repository (tests/packaging/clean_copy.sh: what `git clone` gives, plus the working
# changes), then list their contents with tests/packaging/test_dist.py.
#
#   1. wheel from the clean copy (python -m build --wheel): the build hook runs
#      labextension/build.sh, so the wheel carries the extension nobody built by hand;
#   2. sdist from the same copy: it carries the extension built in step 1;
#   3. wheel from the sdist (pip wheel), with a `node` first on PATH that records any call
#      and fails: building from the sdist must need no Node.js.
#
# Usage: tests/packaging/build_dist.sh [OUT] [PYTHON]   (default: build/dist, python3)
# SOURCE_TREE=DIR builds DIR (a prepared tree without ignored files) instead of the work tree.
# Reaches PyPI (build requirements) and the npm registry (the extension's packages; the
# yarn cache of labextension/.yarn/cache is copied in when there, so a warm machine does not
# download them again).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "${1:-$repo/build/dist}" && cd "${1:-$repo/build/dist}" && pwd)"
python="${2:-python3}"
tools="$out/.venv-build"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

rm -rf "$out/checkout" "$out/sdist" "$out/from-sdist" "$out/node-calls"
if [[ ! -x $tools/bin/pyproject-build ]]; then
  "$python" -m venv "$tools"
  "$tools/bin/python" -m pip install -q build
fi

src="$work/src"
if [[ -n ${SOURCE_TREE:-} ]]; then  # another tree to build (a prepared copy), copied as is
  cp -a "$SOURCE_TREE" "$src"
else
  bash "$repo/tests/packaging/clean_copy.sh" "$src"
fi
if [[ -d $repo/labextension/.yarn/cache ]]; then
  mkdir -p "$src/labextension/.yarn"
  cp -a "$repo/labextension/.yarn/cache" "$src/labextension/.yarn/cache"
fi

stamp() { date +%s.%N; }
t0=$(stamp)
"$tools/bin/python" -m build --wheel --outdir "$out/checkout" "$src" >"$out/checkout.log" 2>&1 \
  || { cat "$out/checkout.log" >&2; exit 1; }
t1=$(stamp)
"$tools/bin/python" -m build --sdist --outdir "$out/sdist" "$src" >"$out/sdist.log" 2>&1 \
  || { cat "$out/sdist.log" >&2; exit 1; }
t2=$(stamp)

# A node that fails and says so: if the wheel-from-sdist build reached for Node.js, it fails,
# and the file it leaves makes the test fail too.
mkdir -p "$work/no-node"
cat >"$work/no-node/node" <<NODE
#!/usr/bin/env bash
echo "node \$*" >>"$out/node-calls"
echo "building from the sdist must not need Node.js" >&2
exit 1
NODE
chmod +x "$work/no-node/node"
PATH="$work/no-node:$PATH" "$tools/bin/python" -m pip wheel -q --no-deps \
  -w "$out/from-sdist" "$out"/sdist/*.tar.gz >"$out/from-sdist.log" 2>&1 \
  || { cat "$out/from-sdist.log" >&2; exit 1; }
t3=$(stamp)

python3 - "$out" "$t0" "$t1" "$t2" "$t3" <<'PY'
import json, sys
out, t0, t1, t2, t3 = sys.argv[1], *map(float, sys.argv[2:])
times = {"wheel_from_checkout_s": t1 - t0, "sdist_s": t2 - t1, "wheel_from_sdist_s": t3 - t2}
with open(f"{out}/timings.json", "w") as f:
    json.dump({k: round(v, 1) for k, v in times.items()}, f)
print("make dist:", ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
PY
ls -l "$out"/checkout/*.whl "$out"/sdist/*.tar.gz "$out"/from-sdist/*.whl

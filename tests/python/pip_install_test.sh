#!/usr/bin/env bash
# pip installs the braid package offline into a fresh venv that sees the system site-packages
# (Debian's torch), with the module this build made, and imports it from outside the tree.
#   pip_install_test.sh <repo root> <built _braid module>
# Exit 77 (CTest skip) when venv/pip or the module are missing.
set -euo pipefail
root=$1
module=$2
py=/usr/bin/python3
[ -f "$module" ] || { echo "SKIP: no built module at $module"; exit 77; }
$py -c "import venv, ensurepip" 2>/dev/null || { echo "SKIP: python3-venv missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$py -m venv --system-site-packages "$tmp/venv"
# Build in a copy: pip's in-tree build writes build/ and *.egg-info next to setup.py.
cp -r "$root/python" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
BRAID_PREBUILT_MODULE="$module" "$tmp/venv/bin/pip" install -q --no-build-isolation --no-index \
  --no-deps "$tmp/src"
cd "$tmp"
PYTHONPATH= "$tmp/venv/bin/python" - "$tmp/venv" <<'PY'
import importlib.util, sys
import braid
if importlib.util.find_spec("torch") is not None:
    import braid.torch  # noqa: F401
assert braid.__file__.startswith(sys.argv[1]), braid.__file__
print("installed", braid.__version__, "at", braid.__file__, "codecs:", braid.CODECS)
PY

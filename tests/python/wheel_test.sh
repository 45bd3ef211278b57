#!/usr/bin/env bash
# The Python wheel, as a user installs it on another machine:
#   1. pip wheel ./python (offline: --no-build-isolation --no-index), with the module this build
#      made (BRAID_PREBUILT_MODULE, so that the test does not build braid a second time);
#   2. the wheel is platform-tagged and carries braid/_braid*.so and the Python sources;
#   3. the module links no libbraid.so and nothing in the build or source tree (braid is linked
#      into it statically: one self-contained file, with no second copy of libbraid to keep at
#      the same version);
#   4. installed offline into a fresh venv that sees Debian's torch, `import braid, braid.torch`
#      works from outside the tree, loads nothing from the build or source tree (checked in
#      /proc/self/maps), and a 2-rank all-reduce runs.
#   wheel_test.sh <repo root> <built _braid module> <build dir>
# Exit 77 (CTest skip) when venv/pip or the module are missing.
set -euo pipefail
root=$(cd "$1" && pwd)
module=$(readlink -f "$2")
build=$(cd "$3" && pwd)
py=/usr/bin/python3
[ -f "$module" ] || { echo "SKIP: no built module at $module"; exit 77; }
$py -c "import venv, ensurepip, pip, wheel" 2>/dev/null || {
  echo "SKIP: python3-venv, python3-pip or python3-wheel missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A copy: pip's in-tree build writes build/ and *.egg-info next to setup.py.
cp -r "$root/python" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
BRAID_PREBUILT_MODULE="$module" $py -m pip wheel -q --no-build-isolation --no-index --no-deps \
  -w "$tmp/dist" "$tmp/src"
whl=$(ls "$tmp"/dist/braid-*.whl)
echo "wheel: $(basename "$whl")"
case "$(basename "$whl")" in
  *-cp3*-linux_x86_64.whl) ;;
  *) echo "FAIL: the wheel is not tagged for this interpreter and platform"; exit 1 ;;
esac
$py - "$whl" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["braid/__init__.py", "braid/torch/__init__.py", "braid/torch/backend.py", "braid/errors.py"]
missing = [n for n in need if n not in names]
so = [n for n in names if n.startswith("braid/_braid") and n.endswith(".so")]
if missing or not so:
    sys.exit(f"FAIL: the wheel lacks {missing or 'braid/_braid*.so'}: {names}")
print("wheel holds", len(names), "files:", ", ".join(sorted(n for n in names if n.startswith("braid/"))))
PY

$py -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install -q --no-index --no-deps "$whl"
so=$(ls "$tmp"/venv/lib/python3*/site-packages/braid/_braid*.so)
if ldd "$so" | grep -E "libbraid|$build|$root"; then
  echo "FAIL: the installed module depends on libbraid.so or the build tree (above)"; exit 1
fi
cd "$tmp"
PYTHONPATH= BRAID_TIMEOUT_MS=30000 "$tmp/venv/bin/python" - "$tmp/venv" "$build" "$root" <<'PY'
import importlib.util, os, socket, subprocess, sys
venv, build, root = sys.argv[1:4]
import braid
if importlib.util.find_spec("torch") is not None:
    import braid.torch  # noqa: F401
assert braid.__file__.startswith(venv), braid.__file__
with open("/proc/self/maps") as f:
    from_tree = sorted({l.split()[-1] for l in f if l.split()[-1].startswith((build, root))})
assert not from_tree, f"loaded from the build/source tree: {from_tree}"
# Two ranks through the installed package (torchrun-style variables, a free port).
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
code = ("import braid, numpy as np; c = braid.init(); a = np.full(1000, c.rank + 1.0, np.float32);"
        "c.all_reduce(a); assert (a == 3).all(), a[:4]; print('rank', c.rank, 'ok')")
procs = [subprocess.Popen([sys.executable, "-c", code],
                          env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                   MASTER_PORT=str(port), BRAID_CALIBRATION_CACHE="off"))
         for r in range(2)]
codes = [p.wait(timeout=120) for p in procs]
assert codes == [0, 0], codes
print("installed", braid.__version__, "at", braid.__file__, "codecs:", braid.CODECS)
PY

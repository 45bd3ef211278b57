#!/usr/bin/env bash
# Installs what braid needs from Debian (only what is missing), then configures and builds it in
# ./build (or $BRAID_BUILD_DIR). Safe to run again; later runs only rebuild what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev
          mpich libmpich-dev openmpi-bin libopenmpi-dev libhwloc-dev libucx-dev iproute2
          python3-dev pybind11-dev python3-numpy python3-torch python3-venv python3-pip python3-wheel
          python3-matplotlib libgloo-dev
          libopenblas0-openmp dpkg-dev file)
# libopenblas0-openmp: Debian's python3-torch calls libblas.so.3, which is the reference BLAS
# (~1 GFLOP/s) unless an optimized one is installed; OpenBLAS (OpenMP build, so that
# torch.set_num_threads also bounds its GEMMs) makes the Python examples and benchmark realistic.
# python3-matplotlib: bench/tune/decision_map.py draws braid-tune simulate's decision map (optional:
# the map is skipped with a message without it).
# libgloo-dev: gloo-perf, the gloo baseline of bench/compare_peers.sh (built only when found), so
# that compare_peers_check runs in the suite instead of skipping.
# dpkg-dev (dpkg-shlibdeps) and file: cpack -G DEB computes the package's dependencies with them.
scripts/apt_install_missing.sh setup "${packages[@]}"

# Shared-memory transports and the intra-host segment live in /dev/shm; say how much there is.
echo "setup: $(nproc) cores; /dev/shm: $(df -h --output=avail /dev/shm 2>/dev/null | tail -1 | tr -d ' ') free"

build="${BRAID_BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${BRAID_BUILD_TYPE:-RelWithDebInfo}" ${BRAID_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"

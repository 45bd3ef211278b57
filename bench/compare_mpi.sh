#!/usr/bin/env bash
# Sets braid's all-reduce against MPICH's and Open MPI's MPI_Allreduce on this machine.
#
#   bench/compare_mpi.sh [BUILD_DIR] [options]        (BUILD_DIR defaults to ./build)
#
# Builds (or configures, when BUILD_DIR is fresh) braid-perf, braid-stream and the two MPI
# baselines, runs braid-stream once, then for every rank count runs braid-perf --ranks N and both
# MPI baselines over the same sizes, and prints one table per rank count: per size braid's time
# and busbw (out-of-place, nccl-tests' headline numbers), MPICH's, Open MPI's, and braid against
# the best MPI: the busbw ratio from 64 KiB up (>1: braid moves more), the time ratio below it
# (<1: braid is faster). Every JSON line of every run goes to one file.
#
# Options:
#   -b MIN -e MAX -f F     sizes, nccl-tests style: MIN x F^k <= MAX (default 8, 256M, 4; with
#                          these the largest step is 128M; -b 16 ends at 256M)
#   -n ITERS -w WARMUP     timed / warm-up iterations per size (default 20 / 5)
#   -d TYPE -o OP          float|double|int32, sum|prod|min|max (default float sum)
#   -a ALGO                braid's algorithm (default auto; with several, the fastest per size)
#   --ranks "2 4"          rank counts (default "2 4")
#   --inplace              compare the in-place columns instead of out-of-place
#   --out DIR              where logs and JSON go (default compare-mpi-<date> in the build dir)
#   --json FILE            the combined JSON lines (default DIR/all.jsonl)
#   --no-stream            skip braid-stream
#   --no-build             use the binaries as they are
#   -j JOBS                build parallelism (default 2)
#   -r REPEAT              run every benchmark REPEAT times and keep each size's fastest
#                          result (default 1; more on a shared, noisy machine)
#   -T SECONDS             limit per run (default 900)
#   -h                     this text
set -u -o pipefail

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src_dir=$(cd "$script_dir/.." && pwd)

build_dir=./build
min_bytes=8
max_bytes=256M
factor=4
iters=20
warmup=5
dtype=float
op=sum
algo=auto
ranks_list="2 4"
inplace=0
out_dir=
json_out=
run_stream=1
do_build=1
jobs=2
limit=900
repeat=1

if [[ $# -gt 0 && $1 != -* ]]; then
  build_dir=$1
  shift
fi
while [[ $# -gt 0 ]]; do
  case $1 in
    -b) min_bytes=$2; shift 2 ;;
    -e) max_bytes=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -d) dtype=$2; shift 2 ;;
    -o) op=$2; shift 2 ;;
    -a) algo=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    --inplace) inplace=1; shift ;;
    --out) out_dir=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    --no-stream) run_stream=0; shift ;;
    --no-build) do_build=0; shift ;;
    -j) jobs=$2; shift 2 ;;
    -T) limit=$2; shift 2 ;;
    -r) repeat=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_mpi.sh: unknown argument '$1' (see -h)" >&2; exit 2 ;;
  esac
done
case $dtype in float|double|int32) ;; *)
  echo "compare_mpi.sh: -d must be float, double or int32 (what the MPI baseline supports)" >&2
  exit 2 ;;
esac
case $op in sum|prod|min|max) ;; *)
  echo "compare_mpi.sh: -o must be sum, prod, min or max (MPI has no avg)" >&2; exit 2 ;;
esac

# --- Build -------------------------------------------------------------------------------------
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  if [[ $do_build == 0 ]]; then
    echo "compare_mpi.sh: $build_dir is not a configured build directory" >&2
    exit 2
  fi
  echo "# configuring $build_dir (RelWithDebInfo)"
  cmake -S "$src_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build_dir.configure.log" 2>&1 ||
    { echo "compare_mpi.sh: cmake configure failed, see $build_dir.configure.log" >&2; exit 1; }
fi
build_dir=$(cd "$build_dir" && pwd)
perf_dir=$build_dir/bench/perf
if [[ $do_build == 1 ]]; then
  echo "# building braid-perf braid-stream (-j$jobs)"
  cmake --build "$build_dir" -j"$jobs" --target braid-perf braid-stream >/dev/null ||
    { echo "compare_mpi.sh: build failed (cmake --build $build_dir --target braid-perf)" >&2; exit 1; }
  for impl in mpich openmpi; do
    cmake --build "$build_dir" -j"$jobs" --target mpi-allreduce-perf-$impl >/dev/null 2>&1 ||
      echo "# note: mpi-allreduce-perf-$impl not built (no /usr/bin/mpicc.$impl or BRAID_WITH_MPI=OFF)"
  done
fi
[[ -x $perf_dir/braid-perf ]] || { echo "compare_mpi.sh: no $perf_dir/braid-perf" >&2; exit 1; }

[[ -n $out_dir ]] || out_dir=$build_dir/compare-mpi-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
[[ -n $json_out ]] || json_out=$out_dir/all.jsonl
: >"$json_out"

common=(-b "$min_bytes" -e "$max_bytes" -f "$factor" -n "$iters" -w "$warmup" -d "$dtype" -o "$op")
failures=0

# run NAME JSONFILE COMMAND...: runs one benchmark under the time limit, keeps its output.
run() {
  local name=$1 json=$2
  shift 2
  echo "# running $name: $*"
  timeout -k 10 "$limit" "$@" -J "$json" >"$out_dir/$name.txt" 2>&1
  local rc=$?
  if [[ $rc != 0 ]]; then
    echo "# $name FAILED (exit $rc); last lines of $out_dir/$name.txt:"
    tail -n 5 "$out_dir/$name.txt" | sed 's/^/#   /'
    failures=$((failures + 1))
  fi
  [[ -f $json ]] && cat "$json" >>"$json_out"
  return 0
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# --- Memory bandwidth --------------------------------------------------------------------------
stream_summary="not measured"
if [[ $run_stream == 1 && -x $perf_dir/braid-stream ]]; then
  echo "# running braid-stream"
  if timeout -k 10 "$limit" "$perf_dir/braid-stream" -J "$out_dir/stream.jsonl" >"$out_dir/stream.txt" 2>&1; then
    cat "$out_dir/stream.jsonl" >>"$json_out"
    stream_summary=$(awk '!/^#/ {
        if ($1 != last) { printf "%s%s thread%s:", (last == "" ? "" : "; "), $1, ($1 > 1 ? "s" : ""); sep = " " }
        printf "%s%s %.1f", sep, $2, $3; sep = ", "; last = $1 }
      END { if (last != "") printf " GB/s (best of runs)" }' \
      "$out_dir/stream.txt")
  else
    echo "# braid-stream FAILED; see $out_dir/stream.txt"
    failures=$((failures + 1))
  fi
fi

# --- Open MPI in a container: CMA single copy may be forbidden (ptrace); fall back to none. -----
ompi_args=()
have_ompi=0
if [[ -x $perf_dir/mpi-allreduce-perf-openmpi ]] && command -v mpiexec.openmpi >/dev/null; then
  have_ompi=1
  ompi_args=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && ompi_args=(--allow-run-as-root "${ompi_args[@]}")
  if [[ -z ${OMPI_MCA_btl_vader_single_copy_mechanism:-} ]]; then
    probe=$(timeout -k 5 60 mpiexec.openmpi "${ompi_args[@]}" -n 2 "$perf_dir/mpi-allreduce-perf-openmpi" \
      -b 1M -e 1M -n 1 -w 0 2>&1)
    if [[ $? != 0 ]] || grep -qiE 'process_vm|single.copy|Read -1' <<<"$probe"; then
      echo "# Open MPI: CMA single copy unusable here; using OMPI_MCA_btl_vader_single_copy_mechanism=none"
      export OMPI_MCA_btl_vader_single_copy_mechanism=none
    fi
  fi
fi
have_mpich=0
if [[ -x $perf_dir/mpi-allreduce-perf-mpich ]] && command -v mpiexec.mpich >/dev/null; then
  have_mpich=1
fi

# --- Runs --------------------------------------------------------------------------------------
# Repeats interleave the implementations so that a burst of foreign load hits all of them alike.
for ((rep = 1; rep <= repeat; rep++)); do
  sfx=$([[ $repeat -gt 1 ]] && echo ".$rep" || true)
  for n in $ranks_list; do
    run "braid-$n$sfx" "$out_dir/braid-$n$sfx.jsonl" "$perf_dir/braid-perf" --ranks "$n" -a "$algo" "${common[@]}"
    if [[ $have_mpich == 1 ]]; then
      run "mpich-$n$sfx" "$out_dir/mpich-$n$sfx.jsonl" mpiexec.mpich -n "$n" \
        "$perf_dir/mpi-allreduce-perf-mpich" "${common[@]}"
    fi
    if [[ $have_ompi == 1 ]]; then
      run "openmpi-$n$sfx" "$out_dir/openmpi-$n$sfx.jsonl" mpiexec.openmpi "${ompi_args[@]}" -n "$n" \
        "$perf_dir/mpi-allreduce-perf-openmpi" "${common[@]}"
    fi
  done
done

# --- Table -------------------------------------------------------------------------------------
machine=$(grep -h -m1 '^# machine' "$out_dir"/braid-*.txt 2>/dev/null | head -n1 | sed 's/^# machine *: //')
[[ -n $machine ]] || machine="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs, host $(hostname)"
placement=$([[ $inplace == 1 ]] && echo in-place || echo out-of-place)
echo
echo "# braid vs MPI_Allreduce — $dtype $op, $placement, -n $iters -w $warmup, algo $algo, best of $repeat run(s)"
echo "# load average: $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end, on $(nproc) CPUs"
echo "# machine: $machine"
echo "# memory copy bandwidth (braid-stream, read+write): $stream_summary"
echo "# times in us, busbw in GB/s; vs-MPI: busbw ratio braid/best-MPI from 64 KiB (>1 = braid"
echo "# faster), time ratio braid/best-MPI below 64 KiB (<1 = braid faster); '-' = no result"
for n in $ranks_list; do
  echo
  echo "## $n ranks"
  awk -v want_inplace="$([[ $inplace == 1 ]] && echo true || echo false)" -v ranks="$n" '
    function field(line, key,    m) {
      if (match(line, "\"" key "\":(\"[^\"]*\"|[^,}]*)")) {
        m = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
        gsub(/"/, "", m)
        return m
      }
      return ""
    }
    {
      if (field($0, "collective") != "all_reduce" || field($0, "inplace") != want_inplace) next
      if (field($0, "ranks") != ranks) next
      tool = field($0, "tool"); algo = field($0, "algo")
      who = tool == "braid-perf" ? "braid" : (algo == "mpi-mpich" ? "mpich" : (algo == "mpi-openmpi" ? "ompi" : ""))
      if (who == "") next
      b = field($0, "bytes") + 0
      sizes[b] = 1
      # With several braid algorithms (-a all or a list) or repeats (-r), the fastest is shown.
      if ((who, b) in t && field($0, "time_us") + 0 >= t[who, b] + 0) next
      t[who, b] = field($0, "time_us"); bw[who, b] = field($0, "busbw_GBps")
      if (who == "braid") { al[b] = algo; wr[b] = field($0, "wrong") }
    }
    function show(v, fmt) { return v == "" ? sprintf("%s", "-") : sprintf(fmt, v) }
    END {
      printf "%12s  %-22s %10s %8s | %10s %8s | %10s %8s | %s\n", "size(B)", "braid algo", "braid us", "busbw", \
             "mpich us", "busbw", "ompi us", "busbw", "braid vs best MPI"
      nsz = 0
      for (s in sizes) list[++nsz] = s + 0
      for (i = 2; i <= nsz; i++) { v = list[i]; for (j = i - 1; j >= 1 && list[j] > v; j--) list[j + 1] = list[j]; list[j + 1] = v }
      for (i = 1; i <= nsz; i++) {
        s = list[i]
        best_t = ""; best_bw = ""
        for (k = 1; k <= 2; k++) {
          w = k == 1 ? "mpich" : "ompi"
          if (t[w, s] != "" && (best_t == "" || t[w, s] + 0 < best_t + 0)) best_t = t[w, s]
          if (bw[w, s] != "" && (best_bw == "" || bw[w, s] + 0 > best_bw + 0)) best_bw = bw[w, s]
        }
        ratio = "-"
        if (t["braid", s] != "" && best_t != "") {
          if (s >= 65536 && best_bw + 0 > 0) ratio = sprintf("busbw x%.2f", bw["braid", s] / best_bw)
          else if (best_t + 0 > 0) ratio = sprintf("time  x%.2f", t["braid", s] / best_t)
        }
        if (wr[s] != "" && wr[s] + 0 > 0) ratio = ratio "  (" wr[s] " wrong!)"
        printf "%12d  %-22s %10s %8s | %10s %8s | %10s %8s | %s\n", s, (al[s] == "" ? "-" : al[s]), \
               show(t["braid", s], "%.2f"), show(bw["braid", s], "%.2f"), \
               show(t["mpich", s], "%.2f"), show(bw["mpich", s], "%.2f"), \
               show(t["ompi", s], "%.2f"), show(bw["ompi", s], "%.2f"), ratio
      }
    }' "$json_out"
done
echo
echo "# logs: $out_dir; JSON lines: $json_out"
if [[ $failures -gt 0 ]]; then
  echo "# $failures run(s) failed"
  exit 1
fi

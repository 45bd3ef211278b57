#!/usr/bin/env bash
# braid-train-bench --ranks 2 over ResNet-50 and BERT-base (tensors 1000x smaller, 5 ms of
# emulated backward) in all three modes. Checks what the issue asks of its output: one JSON
# object per profile and mode with the named fields, the profiles' tensor counts, one bucket per
# tensor in per-tensor mode, exposed = step - compute and eta = 1 - exposed/comm as defined, and
# every text line labelled compute=emulated ... device=cpu; tail_floor_ms, the last-ready
# gradient's all-reduce alone, was timed, and exposed_per_floor reported; --zero-copy runs and
# says so (grads=zero-copy).
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" --ranks 2 -p resnet50,bert-base -m per-tensor,fixed-25m,auto -n 2 -w 1 --scale 1000 \
  --backward-ms resnet50=5,bert-base=5 -J "$dir/out.json" -T 150 > "$dir/out.txt"
# Zero-copy (gradients in bucket storage, marked ready in place): BERT-base, auto.
"$bin" --ranks 2 -p bert-base -m auto -n 2 -w 1 --scale 1000 --backward-ms 5 --zero-copy \
  -J "$dir/zero.json" -T 150 > "$dir/zero.txt"
python3 - "$dir/out.json" "$dir/out.txt" "$dir/zero.json" <<'PY'
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
text = [line for line in open(sys.argv[2]) if line.startswith("profile=")]
tensors = {"resnet50": 161, "bert-base": 199}
want = {(p, m) for p in tensors for m in ("per-tensor", "fixed-25m", "auto")}
got = {(r["profile"], r["mode"]) for r in rows}
assert len(rows) == 6 and got == want, f"rows {sorted(got)}"
for r in rows:
    where = f"{r['profile']}/{r['mode']}"
    for k in ("profile", "mode", "ranks", "tensors", "step_ms", "compute_ms", "comm_ms",
              "exposed_ms", "eta", "buckets", "compute", "device", "tail_floor_ms",
              "exposed_per_floor"):
        assert k in r, f"{where}: no {k}"
    # The last gradient alone was timed (a load on the machine can make it slower than comm_ms,
    # so no upper bound).
    assert r["tail_floor_ms"] > 0, f"{where}: tail floor {r['tail_floor_ms']}"
    # Per step: (step - compute) / the floor taken just before it; the median of those.
    assert 0 <= r["exposed_per_floor"] < 1e6, f"{where}: exposed_per_floor {r['exposed_per_floor']}"
    assert r["ranks"] == 2, where
    assert r["tensors"] == tensors[r["profile"]], f"{where}: {r['tensors']} tensors"
    assert 1 <= r["buckets"] <= r["tensors"], where
    if r["mode"] == "per-tensor":
        assert r["buckets"] == r["tensors"], f"{where}: {r['buckets']} buckets"
    assert r["compute_ms"] >= 4.0, f"{where}: compute {r['compute_ms']} ms for 5 ms of backward"
    assert r["step_ms"] > 0 and r["comm_ms"] > 0, where
    exposed = max(0.0, r["step_ms"] - r["compute_ms"])
    assert abs(r["exposed_ms"] - exposed) < 1e-3, f"{where}: exposed {r['exposed_ms']}"
    eta = min(1.0, max(0.0, 1.0 - exposed / r["comm_ms"]))
    assert abs(r["eta"] - eta) < 1e-3, f"{where}: eta {r['eta']} vs {eta}"
    assert r["compute"].startswith("emulated(sleep,profile=" + r["profile"]), where
    assert r["device"] == "cpu", where
assert len(text) == 6, f"{len(text)} text lines"
for line in text:
    assert "compute=emulated(sleep,profile=" in line and "device=cpu" in line, line
assert all(r["grads"] == "copy" for r in rows), "the default run is not in copy mode"
zero = [json.loads(line) for line in open(sys.argv[3]) if line.strip()]
assert len(zero) == 1 and zero[0]["grads"] == "zero-copy", f"zero-copy rows {zero}"
assert zero[0]["tail_floor_ms"] > 0 and zero[0]["comm_ms"] > 0, zero[0]
print("train_bench_check: 6 rows ok, and a zero-copy row")
PY

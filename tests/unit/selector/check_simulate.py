#!/usr/bin/env python3
"""Checks `braid-tune simulate` on a described 128-host x 8-rank fabric (CTest: simulate_check).

    check_simulate.py BRAID_TUNE WORKDIR

The JSON parses; every collective of the table is there; every row's algorithm is one of the
collective's rows, available on this fabric, among the priced candidates and (chosen by the model)
the cheapest of them; sizes cover 8 B to 4 GiB in powers of two; the decision map has every world
size's choices and agrees with the rows on the fabric's own world; the tuner plugin's table covers
1 and 1024 nodes; a topology file is read; the decision map PNG is written when matplotlib is
installed (else the tool says it skipped it). --help and a bad option behave.
"""
import json
import math
import os
import subprocess
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED: " + what, file=sys.stderr)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def main(argv):
    tool, work = argv[1], argv[2]
    os.makedirs(work, exist_ok=True)
    js, png = os.path.join(work, "sim.json"), os.path.join(work, "sim.png")
    for f in (js, png):
        if os.path.exists(f):
            os.remove(f)
    fabric = ["--hosts", "128", "--ranks-per-host", "8", "--inter-alpha", "5", "--inter-gbps",
              "100", "--intra-alpha", "1", "--intra-gbps", "200", "--copy-gbps", "100",
              "--cores-per-host", "64"]
    r = run([tool, "simulate"] + fabric + ["--json", js, "--png", png, "--nccl-tuner",
                                           "--nccl-nodes", "1,2,1024", "--nccl-gpus", "1,8"])
    check(r.returncode == 0, "simulate exited %d: %s" % (r.returncode, r.stderr))
    check("# allreduce" in r.stdout and "hierarchical" in r.stdout, "no all-reduce table")
    with open(js) as f:
        sim = json.load(f)

    fab = sim["fabric"]
    check(fab["hosts"] == 128 and fab["ranks_per_host"] == 8 and fab["ranks"] == 1024,
          "fabric %r" % fab)
    check("inter_alpha_us=5 " in fab["model"], "model line lacks inter_alpha_us=5")
    table = sim["algorithms"]
    want = ["allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall",
            "barrier"]
    check(sorted(table) == sorted(want), "collectives %r" % sorted(table))
    rows = sim["rows"]
    by_coll = {}
    for row in rows:
        c = row["collective"]
        by_coll.setdefault(c, []).append(row)
        at = "%s %d B" % (c, row["bytes"])
        algo = row["algorithm"]
        check(algo in table.get(c, []), at + ": %r is not an algorithm of %s" % (algo, c))
        check(algo not in row["unavailable"], at + ": %s is unavailable here" % algo)
        check(algo in row["candidates"], at + ": %s not among the candidates" % algo)
        for name in row["candidates"]:
            check(name not in row["unavailable"], at + ": %s priced and unavailable" % name)
        t = row["time_us"]
        check(isinstance(t, (int, float)) and math.isfinite(t) and t > 0, at + ": time %r" % t)
        check(row["busbw_gbs"] >= 0, at + ": busbw %r" % row["busbw_gbs"])
        check(row["reason"] == "model", at + ": reason %r" % row["reason"])
        cheapest = min(row["candidates"].values())
        check(t <= cheapest * (1 + 1e-9), at + ": %s at %g us, a candidate takes %g" %
              (algo, t, cheapest))
        if row["runner_up"] is not None:
            check(row["runner_up"] != algo and row["runner_up"] in row["candidates"],
                  at + ": runner-up %r" % row["runner_up"])
            check(row["margin_pct"] >= 0, at + ": margin %r" % row["margin_pct"])
        if c == "allreduce":
            check("shm" in row["unavailable"], at + ": shm available across 128 hosts")
    powers = [8 << i for i in range(30)]  # 8 B .. 4 GiB
    for c in want:
        got = sorted(r["bytes"] for r in by_coll.get(c, []))
        if c == "barrier":
            check(got == [0], "barrier rows %r" % got)
        else:
            check(got == powers, "%s sizes %s..%s (%d rows), want 8..4G" %
                  (c, got[:1], got[-1:], len(got)))

    m = sim["map"]
    check(m["sizes"] == powers, "map sizes")
    worlds = {w["ranks"]: w for w in m["worlds"]}
    check(8 in worlds and 1024 in worlds and 16384 in worlds, "map worlds %r" % sorted(worlds))
    for w in m["worlds"]:
        for c in want:
            check(len(w["choices"][c]) == len(powers), "map %d ranks %s" % (w["ranks"], c))
            for a in w["choices"][c]:
                check(a in table[c], "map %d ranks %s: %r" % (w["ranks"], c, a))
    own = worlds.get(1024, {"choices": {}})["choices"]
    for c in want:
        if c != "barrier":
            check(own.get(c) == [r["algorithm"] for r in sorted(by_coll[c],
                                                                key=lambda r: r["bytes"])],
                  "map row of the fabric's own world differs from the table for %s" % c)

    tuner = sim["nccl_tuner"]
    ar = [t for t in tuner if t["collective"] == "allreduce"]
    check(any(t["nodes"] == 1024 and t["gpus_per_node"] == 8 for t in ar), "no 1024x8 entries")
    for t in ar:
        if t["nodes"] == 1:
            check(t["algorithm"] is None, "tuner has an opinion on one node")
        else:
            check(t["algorithm"] in ("ring", "tree"), "tuner picks %r" % t["algorithm"])
            cheaper = "tree" if t["tree_us"] < t["ring_us"] else "ring"
            check(t["algorithm"] == cheaper, "tuner picks %s, its model says %s" %
                  (t["algorithm"], cheaper))

    # The PNG: the tool runs $PYTHON, else /usr/bin/python3, else python3.
    python = os.environ.get("PYTHON") or (
        "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3")
    has_mpl = run([python, "-c", "import matplotlib"]).returncode == 0
    if has_mpl:
        check(os.path.exists(png), "no PNG written although matplotlib is installed")
        if os.path.exists(png):
            with open(png, "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG")
    else:
        print("matplotlib is not installed: the PNG is skipped (checked the message)")
        check("matplotlib is not installed" in r.stderr, "no skip message: %r" % r.stderr)

    # A topology file: its hosts, cores and network link.
    topo = os.path.join(work, "two.topo")
    with open(topo, "w") as f:
        f.write("braid-topology 1\nhost name=a\nsocket id=0\ncore id=0 socket=0\n"
                "core id=1 socket=0\nhost name=b\n"
                "fabric-link from=host:a to=host:b kind=net gbps=200 latency_us=3.5\n")
    tj = os.path.join(work, "topo.json")
    r = run([tool, "simulate", "--topology", topo, "--ranks-per-host", "2", "-c", "allreduce",
             "-q", "--json", tj])
    check(r.returncode == 0, "--topology exited %d: %s" % (r.returncode, r.stderr))
    if r.returncode == 0:
        with open(tj) as f:
            t = json.load(f)
        check(t["fabric"]["hosts"] == 2 and t["fabric"]["cores_per_host"] == 2,
              "topology fabric %r" % t["fabric"])
        check("inter_alpha_us=3.5 " in t["fabric"]["model"], "topology latency not used")
        check("inter_beta_us_per_byte=4e-05 " in t["fabric"]["model"], "topology gbps not used")

    r = run([tool, "simulate", "--help"])
    check(r.returncode == 0 and "--topology" in r.stdout and "--nccl-tuner" in r.stdout,
          "--help")
    r = run([tool, "simulate", "--hosts", "2", "--bogus"])
    check(r.returncode == 2 and "unknown option" in r.stderr, "a bad option: %d" % r.returncode)
    r = run([tool, "simulate"])
    check(r.returncode == 2, "no fabric accepted")

    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("simulate: %d rows, %d map worlds, %d tuner entries: OK" %
          (len(rows), len(m["worlds"]), len(tuner)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""The merged-timeline test (CTest: trace_merged; label multirank).

    check_trace.py BRAID_RUN TRACE_CHECK BRAID_TRACE WORKDIR

Four ranks of trace_check run a Bucketer with rank 2 delayed by 20 ms per step and
BRAID_TRACE_FILE=WORKDIR/trace-%r.json; then `braid-trace merge` joins the four files and
`braid-trace report --json` reads them back. Checks: every rank wrote its file; the merged file is
a valid trace in the JSON object format that Perfetto and chrome://tracing read (validated below
against that format's rules: a traceEvents list of events with a known phase, string names,
integer pid/tid, numeric ts, dur >= 0 on complete events, args objects, metadata events naming
processes and threads); collectives carry their algorithm, bytes and sequence number, and every
rank has the same sequence numbers; the report names rank 2 as the last arrival in every bucket
(by about the delay).
"""
import json
import os
import subprocess
import sys

SLOW = 2
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED: " + what, file=sys.stderr)


# The Trace Event Format's phases (complete, duration begin/end, instant, counter, async, flow,
# sample, object, metadata, memory dump, mark, clock sync, context).
PHASES = set("XBEiICbnestfPNODMRcV()") | {"I"}


def validate(doc):
    """Errors of `doc` against the Trace Event Format's JSON object form."""
    errs = []
    if not isinstance(doc, dict):
        return ["top level is not an object"]
    evs = doc.get("traceEvents")
    if not isinstance(evs, list):
        return ["no traceEvents array"]
    if "displayTimeUnit" in doc and doc["displayTimeUnit"] not in ("ms", "ns"):
        errs.append("displayTimeUnit %r" % doc["displayTimeUnit"])
    for i, e in enumerate(evs):
        at = "event %d" % i
        if not isinstance(e, dict):
            errs.append(at + " is not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or ph not in PHASES:
            errs.append(at + ": phase %r" % ph)
        if not isinstance(e.get("name"), str):
            errs.append(at + ": name %r" % e.get("name"))
        for k in ("pid", "tid"):
            if not isinstance(e.get(k), int) or isinstance(e.get(k), bool):
                errs.append(at + ": %s %r" % (k, e.get(k)))
        if "args" in e and not isinstance(e["args"], dict):
            errs.append(at + ": args is not an object")
        if "cat" in e and not isinstance(e["cat"], str):
            errs.append(at + ": cat %r" % e["cat"])
        if ph == "M":
            if e.get("name") not in ("process_name", "process_labels", "process_sort_index",
                                     "thread_name", "thread_sort_index"):
                errs.append(at + ": metadata %r" % e.get("name"))
            if not isinstance(e.get("args"), dict):
                errs.append(at + ": metadata without args")
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            errs.append(at + ": ts %r" % ts)
        if ph == "X":
            d = e.get("dur")
            if not isinstance(d, (int, float)) or d < 0:
                errs.append(at + ": dur %r" % d)
    return errs


def attempt(argv):
    """One run: 0 passed, 1 failed, 3 only the straggler checks failed."""
    del failures[:]
    braid_run, prog, braid_trace, work = argv[1:5]
    os.makedirs(work, exist_ok=True)
    for f in os.listdir(work):
        os.remove(os.path.join(work, f))
    env = dict(os.environ, BRAID_TRACE_FILE=os.path.join(work, "trace-%r.json"))
    r = subprocess.run([braid_run, "-n", "4", "--timeout", "120", "--", prog, "--slow", str(SLOW),
                        "--steps", "4"], env=env, capture_output=True, text=True, timeout=180)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, "trace_check exited %d" % r.returncode)
    files = [os.path.join(work, "trace-%d.json" % k) for k in range(4)]
    for f in files:
        check(os.path.exists(f), "no " + f)
    if failures:
        return 1
    for f in files:
        with open(f) as fh:
            errs = validate(json.load(fh))
        check(not errs, "%s: %s" % (f, "; ".join(errs[:5])))

    merged = os.path.join(work, "merged.json")
    r = subprocess.run([braid_trace, "merge", merged] + files, capture_output=True, text=True)
    check(r.returncode == 0, "merge: %s" % r.stderr)
    with open(merged) as fh:
        doc = json.load(fh)
    errs = validate(doc)
    check(not errs, "merged: " + "; ".join(errs[:5]))
    evs = doc["traceEvents"]
    check({e["pid"] for e in evs} == {0, 1, 2, 3}, "merged pids")
    colls = [e for e in evs if e.get("cat") == "collective"]
    check(len(colls) > 0, "no collective events")
    for e in colls:
        a = e.get("args", {})
        check(isinstance(a.get("algorithm"), str) and a["algorithm"] != "" and
              isinstance(a.get("bytes"), int) and isinstance(a.get("seq"), int),
              "collective event args %r" % a)
    seqs = [sorted(e["args"]["seq"] for e in colls if e["pid"] == k) for k in range(4)]
    check(all(s == seqs[0] for s in seqs), "ranks traced different sequence numbers")
    buckets = [e for e in evs if e.get("cat") == "bucket"]
    nb = len({e["args"]["bucket"] for e in buckets})
    check(nb >= 2 and len(buckets) == 4 * 4 * nb,
          "bucket events: %d, want 4 ranks x 4 steps x %d buckets" % (len(buckets), nb))

    rep = os.path.join(work, "report.json")
    r = subprocess.run([braid_trace, "report", "--json", rep, merged], capture_output=True,
                       text=True)
    sys.stdout.write(r.stdout)
    check(r.returncode == 0, "report: %s" % r.stderr)
    with open(rep) as fh:
        report = json.load(fh)
    check(len(report["buckets"]) == 4 * nb, "report buckets: %d" % len(report["buckets"]))
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    for b in report["buckets"]:
        check(b["last_rank"] == SLOW, "step %d bucket %d: last arrival rank %d, not %d" %
              (b["step"], b["bucket"], b["last_rank"], SLOW))
        # A bucket's event starts when its gradients are ready on that rank: 20 ms later on the
        # slow one in every bucket.
        want = 10
        check(b["last_after_median_ms"] > want, "step %d bucket %d: last only %.2f ms after the "
              "median (want > %d)" % (b["step"], b["bucket"], b["last_after_median_ms"], want))
    if failures:
        print("%d straggler check(s) failed" % len(failures), file=sys.stderr)
        return 3
    print("trace_merged: OK")
    return 0


def main(argv):
    # What the trace says is checked every time; who arrived last is timing: on a machine with
    # fewer cores than ranks (and other jobs) a rank can be kept off a core longer than the
    # delay, and then the report rightly names it. Such a run is retried, twice at most.
    for i in range(3):
        rc = attempt(argv)
        if rc != 3:
            return rc
        print("trace_merged: attempt %d: another rank was later than the delayed one; again" %
              (i + 1), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""braid-trace: joins and reads the per-rank trace files that BRAID_TRACE_FILE makes braid write.

    braid-trace merge OUT.json trace-0.json trace-1.json ...
    braid-trace report [--top N] [--json FILE] TRACE.json ...   (merged or per-rank files)

Each rank's file (core/trace.h) holds Chrome / Perfetto trace events in the JSON object format:
complete events ("ph": "X") of its collectives (args: seq, algorithm, count, bytes), of the
Bucketer's buckets (args: bucket, step, bytes) and of waits on a peer (args: peer), timed in
microseconds from a zero that every rank took at the same moment (two barriers at communicator
creation), with pid = rank. `merge` writes one file with every rank's events, which Perfetto
(ui.perfetto.dev) and chrome://tracing open as one timeline, one process per rank.

`report` prints the slowest collectives (from the first rank's arrival to the last rank's end)
and, per collective and per bucket, the rank that arrived last and by how much (after the first
arrival and after the median one): the straggler view. Then, per rank, how often it was last.
"""
import json
import statistics
import sys

USAGE = __doc__.split("\n\n")[1]


def load(paths):
    events, ranks, zero = [], set(), None
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
            raise SystemExit("braid-trace: %s is not a trace (no traceEvents list)" % path)
        other = doc.get("otherData", {})
        if "rank" in other:
            ranks.add(other["rank"])
        ranks.update(other.get("ranks", []))
        z = other.get("zero_wall_us")
        if z is not None:
            zero = z if zero is None else min(zero, z)
        events.extend(doc["traceEvents"])
    return events, sorted(ranks), zero


def merge(out, paths):
    events, ranks, zero = load(paths)
    meta = [e for e in events if e.get("ph") == "M"]
    rest = sorted((e for e in events if e.get("ph") != "M"),
                  key=lambda e: (e.get("ts", 0), e.get("pid", 0)))
    doc = {"displayTimeUnit": "ms",
           "otherData": {"tool": "braid-trace merge", "ranks": ranks, "zero_wall_us": zero},
           "traceEvents": meta + rest}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print("braid-trace: merged %d events of %d rank(s) into %s" % (len(rest), len(ranks), out))
    return 0


def arrivals(events, cat, key):
    """{key: {rank: (ts, end)}} for the complete events of `cat`."""
    groups = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != cat:
            continue
        k = key(e)
        if k is None:
            continue
        groups.setdefault(k, {})[e["pid"]] = (e["ts"], e["ts"] + e.get("dur", 0), e)
    return groups


def straggler(group):
    ts = sorted((t, r) for r, (t, _, _) in group.items())
    last_t, last_r = ts[-1]
    median = statistics.median(t for t, _ in ts)
    return last_r, last_t - ts[0][0], last_t - median


def report(paths, top, json_out):
    events, ranks, _ = load(paths)
    colls = arrivals(events, "collective", lambda e: e.get("args", {}).get("seq"))
    buckets = arrivals(events, "bucket",
                       lambda e: (e["args"]["step"], e["args"]["bucket"])
                       if "step" in e.get("args", {}) else None)
    nranks = max(len(ranks), max((len(g) for g in colls.values()), default=0))
    out = {"ranks": nranks, "collectives": [], "buckets": [], "last_counts": {}}
    print("# braid-trace report: %d rank(s), %d collective(s), %d bucket run(s)" %
          (nranks, len(colls), len(buckets)))

    rows = []
    for seq, g in colls.items():
        first = min(t for t, _, _ in g.values())
        end = max(e for _, e, _ in g.values())
        last_r, after_first, after_median = straggler(g)
        any_e = next(iter(g.values()))[2]
        a = any_e.get("args", {})
        rows.append({"seq": seq, "name": any_e["name"], "algorithm": a.get("algorithm", ""),
                     "bytes": a.get("bytes", 0), "span_ms": (end - first) / 1e3,
                     "last_rank": last_r, "last_after_first_ms": after_first / 1e3,
                     "last_after_median_ms": after_median / 1e3, "ranks": len(g)})
    rows.sort(key=lambda r: r["seq"])
    out["collectives"] = rows
    print("\n# slowest collectives (first arrival to last end)")
    print("#%6s %-14s %-20s %12s %10s %6s %12s %12s" % ("seq", "collective", "algorithm",
                                                        "bytes", "span_ms", "last", "+first_ms",
                                                        "+median_ms"))
    for r in sorted(rows, key=lambda r: -r["span_ms"])[:top]:
        print("%7d %-14s %-20s %12d %10.3f %6d %12.3f %12.3f" % (
            r["seq"], r["name"], r["algorithm"], r["bytes"], r["span_ms"], r["last_rank"],
            r["last_after_first_ms"], r["last_after_median_ms"]))

    brows = []
    for (step, bucket), g in sorted(buckets.items()):
        last_r, after_first, after_median = straggler(g)
        brows.append({"step": step, "bucket": bucket, "last_rank": last_r,
                      "last_after_first_ms": after_first / 1e3,
                      "last_after_median_ms": after_median / 1e3, "ranks": len(g)})
    out["buckets"] = brows
    if brows:
        print("\n# buckets: the rank that launched last (arrived last) and by how much")
        print("#%5s %6s %6s %12s %12s" % ("step", "bucket", "last", "+first_ms", "+median_ms"))
        for b in brows:
            print("%6d %6d %6d %12.3f %12.3f" % (b["step"], b["bucket"], b["last_rank"],
                                                 b["last_after_first_ms"],
                                                 b["last_after_median_ms"]))

    counts = {}
    for r in rows + brows:
        counts[r["last_rank"]] = counts.get(r["last_rank"], 0) + 1
    out["last_counts"] = {str(k): v for k, v in sorted(counts.items())}
    print("\n# last arrivals per rank (collectives and buckets)")
    for k, v in sorted(counts.items()):
        print("rank %d: last %d time(s)" % (k, v))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(USAGE)
        return 0 if len(argv) >= 2 else 2
    cmd, args = argv[1], argv[2:]
    if cmd == "merge":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        return merge(args[0], args[1:])
    if cmd == "report":
        top, json_out, paths = 10, None, []
        i = 0
        while i < len(args):
            if args[i] == "--top" and i + 1 < len(args):
                top = int(args[i + 1])
                i += 2
            elif args[i] == "--json" and i + 1 < len(args):
                json_out = args[i + 1]
                i += 2
            else:
                paths.append(args[i])
                i += 1
        if not paths:
            print(USAGE, file=sys.stderr)
            return 2
        return report(paths, top, json_out)
    print("braid-trace: unknown command %r\n%s" % (cmd, USAGE), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""The tables and plots of bench/compare_peers.sh, from its combined JSON lines.

    compare_peers.py ALL.jsonl --out DIR [--inplace] [--rate-Bps B --rate-text 1gbit]
                     [--tcp-Bps B] [--no-plot]

Every line carries "impl" (braid, mpich, openmpi, gloo) and "placement" (local-N, fabric-HxM),
added by compare_peers.sh to what braid-perf, mpi-perf and gloo-perf write. Per collective and
placement it prints, per size, each implementation's fastest time and its busbw, and braid's time /
the best peer's time (<1: braid is faster; against MPI's broadcast, which has one buffer, braid's
in-place time, the out-of-place table saying so on each such row; none where a reduce-scatter's
or all-gather's blocks are all empty); on the fabric also the link bound (compare_peers.sh -h
gives the formulas) and braid's share of it. With matplotlib (python3-matplotlib), it draws
DIR/compare-peers.png (busbw vs size, one panel per collective x placement, the link bound dashed)
and DIR/compare-peers-ratio.png (braid / best peer per size, one panel per collective).
"""
import argparse
import json
import os
import sys

IMPLS = ["braid", "mpich", "openmpi", "gloo"]
PEERS = IMPLS[1:]
MPI_PEERS = ["mpich", "openmpi"]
# braid's in-place broadcast rows in an out-of-place comparison (braid_vs_peers).
BRAID_ONE_BUFFER = "braid-in-place"
LABELS = {"braid": "braid", "mpich": "MPICH", "openmpi": "Open MPI", "gloo": "gloo",
          "braid-in-place": "braid i.p."}
COLLS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast"]
# busbw / algbw for n ranks, as braid-perf and nccl-tests.
BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
# The fewest bytes one host's link must carry in one direction, as a multiple of S, for H hosts
# (why each: compare_peers.sh -h).
LINK_FACTOR = {
    "all_reduce": lambda h: 2.0 * (h - 1) / h,
    "reduce_scatter": lambda h: (h - 1) / h,
    "all_gather": lambda h: (h - 1) / h,
    "broadcast": lambda h: 1.0 if h > 1 else 0.0,
}


def placement_key(p):
    kind, _, rest = p.partition("-")
    if kind == "local":
        return (0, int(rest), 0)
    hosts, _, per = rest.partition("x")
    return (1, int(hosts or 0), int(per or 0))


def placement_title(p):
    kind, _, rest = p.partition("-")
    if kind == "local":
        return f"{rest} local ranks"
    hosts, _, per = rest.partition("x")
    return f"fabric {hosts} hosts x {per} ranks"


def fabric_hosts(p):
    kind, _, rest = p.partition("-")
    return int(rest.partition("x")[0]) if kind == "fabric" else 0


def load(path, inplace):
    """{(placement, coll): {impl: {bytes: row}}}, the fastest row per size; the rank counts; and
    {(placement, coll): {impl: [(ns before, ns after), ...]}}, the core round trip around each
    run (compare_peers.sh's core_rtt)."""
    groups = {}
    ranks = {}
    rtts = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            impl, placement, coll = r.get("impl"), r.get("placement"), r.get("collective")
            if impl not in IMPLS or coll not in COLLS:
                continue
            if r.get("inplace") != inplace:
                # MPI_Bcast has one buffer (mpi-perf runs the same call in both columns): braid's
                # in-place broadcast is what compares with it (like_for_like).
                if not (impl == "braid" and coll == "broadcast" and r.get("inplace")):
                    continue
                impl = BRAID_ONE_BUFFER
            rtt = r.get("core_rtt_ns")
            if isinstance(rtt, list) and len(rtt) == 2 and impl != BRAID_ONE_BUFFER:
                runs = rtts.setdefault((placement, coll), {}).setdefault(impl, [])
                if tuple(rtt) not in runs:
                    runs.append(tuple(rtt))
            g = groups.setdefault((placement, coll), {}).setdefault(impl, {})
            b = int(r["bytes"])
            if b not in g or r["time_us"] < g[b]["time_us"]:
                g[b] = r
            ranks[placement] = int(r["ranks"])
    return groups, ranks, rtts


def empty_blocks(row):
    """A reduce-scatter or all-gather whose vector has fewer elements than ranks: every block is
    empty, MPI returns at once (0.04 us) while braid still synchronizes (so that a rank that
    passed another count is caught); no time ratio is taken there."""
    return (row.get("collective") in ("reduce_scatter", "all_gather")
            and int(row.get("count", 1)) < int(row.get("ranks", 1)))


def braid_vs_peers(rows, b):
    """(braid's time / the peer's, peer, braid's row was in place) against the peer braid fares
    worst with at size b; None without braid or peers. Against MPI's broadcast, one buffer, the
    out-of-place table takes braid's in-place row where there is one: out of place braid's root
    also copies the message into its receive buffer, which MPI_Bcast never does."""
    braid = rows.get("braid", {}).get(b)
    if not braid or empty_blocks(braid):
        return None
    worst = None
    for p in PEERS:
        r = rows.get(p, {}).get(b)
        if not r or r["time_us"] <= 0:
            continue
        mine, one_buffer = braid, False
        if p in MPI_PEERS and b in rows.get(BRAID_ONE_BUFFER, {}):
            mine, one_buffer = rows[BRAID_ONE_BUFFER][b], True
        ratio = mine["time_us"] / r["time_us"]
        if worst is None or ratio > worst[0]:
            worst = (ratio, p, one_buffer)
    return worst


def fmt(v, f="%.2f"):
    return "-" if v is None else f % v


def print_tables(groups, ranks, rtts, rate_bps, rate_text, tcp_bps=0.0):
    for placement in sorted({p for p, _ in groups}, key=placement_key):
        hosts = fabric_hosts(placement)
        for coll in COLLS:
            rows = groups.get((placement, coll))
            if not rows:
                continue
            present = [i for i in IMPLS if i in rows]
            if BRAID_ONE_BUFFER in rows:
                present.insert(1, BRAID_ONE_BUFFER)
            print()
            print(f"## {coll}, {placement_title(placement)} ({ranks[placement]} ranks)")
            bound = hosts > 1 and rate_bps
            if bound:
                print(f"# link bound = {LINK_FACTOR[coll](hosts):.3g} x S / {rate_text}"
                      f" ({hosts} hosts); %bound = bound / braid's time"
                      + ("; %tcp = the same at TCP's goodput (iperf3 --bidir)" if tcp_bps else ""))
            head = f"{'size(B)':>12}  {'braid algo':<22}"
            for i in present:
                head += f" | {LABELS[i] + ' us':>11} {'busbw':>7}"
            if bound:
                head += f" | {'bound us':>10} {'%bound':>6}"
                if tcp_bps:
                    head += f" {'%tcp':>5}"
            head += " | braid / best peer (time)"
            print(head)
            sizes = sorted({b for i in present for b in rows[i]})
            for b in sizes:
                braid = rows.get("braid", {}).get(b)
                line = f"{b:>12}  {(braid['algo_chosen'] if braid else '-'):<22}"
                for i in present:
                    r = rows[i].get(b)
                    line += f" | {fmt(r and r['time_us']):>11} {fmt(r and r['busbw_GBps']):>7}"
                if bound:
                    t = LINK_FACTOR[coll](hosts) * b / rate_bps * 1e6
                    share = t / braid["time_us"] * 100 if braid and braid["time_us"] > 0 else None
                    line += f" | {t:>10.1f} {fmt(share, '%.0f%%'):>6}"
                    if tcp_bps:
                        tcp = share * rate_bps / tcp_bps if share is not None else None
                        line += f" {fmt(tcp, '%.0f%%'):>5}"
                vs = braid_vs_peers(rows, b)
                ratio = "- (empty blocks: fewer elements than ranks)" if (
                    braid and empty_blocks(braid)) else "-"
                if vs:
                    ratio = (f"x{vs[0]:.2f} (vs {LABELS[vs[1]]}"
                             + (", braid in place as MPI_Bcast)" if vs[2] else ")"))
                if braid and braid.get("wrong", 0) > 0:
                    ratio += f"  ({braid['wrong']:.0f} wrong!)"
                print(line + " | " + ratio)
            runs = rtts.get((placement, coll), {})
            if runs:
                # Where the vCPUs sat during each run (bench/micro/core_roundtrip): rows of runs
                # whose round trips differ several-fold compare two placements, not two libraries.
                parts = []
                for i in IMPLS:
                    if i in runs:
                        pairs = ", ".join(f"{fmt(a, '%.0f')}/{fmt(b, '%.0f')}" for a, b in runs[i])
                        parts.append(f"{LABELS[i]} {pairs}")
                print("# core round trip before/after each run, ns: " + "; ".join(parts))


def size_text(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div:
            return f"{b / div:g}{unit}"
    return f"{b}"


def plot(groups, ranks, rate_bps, out_dir, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        print("# no matplotlib (apt-get install python3-matplotlib): no plots")
        return []
    placements = sorted({p for p, _ in groups}, key=placement_key)
    colls = [c for c in COLLS if any((p, c) in groups for p in placements)]
    if not placements or not colls:
        return []
    colors = {"braid": "C3", "mpich": "C0", "openmpi": "C2", "gloo": "C1"}
    xfmt = FuncFormatter(lambda v, _: size_text(int(v)))
    written = []

    def save(fig, name):
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    fig, axes = plt.subplots(len(colls), len(placements), squeeze=False,
                             figsize=(4.2 * len(placements), 3.0 * len(colls)))
    for ci, coll in enumerate(colls):
        for pi, placement in enumerate(placements):
            ax = axes[ci][pi]
            rows = groups.get((placement, coll), {})
            for impl in IMPLS:
                if impl not in rows:
                    continue
                xs = sorted(rows[impl])
                ax.plot(xs, [rows[impl][b]["busbw_GBps"] for b in xs], marker=".",
                        color=colors[impl], label=LABELS[impl])
            hosts = fabric_hosts(placement)
            if hosts > 1 and rate_bps and rows:
                n = ranks[placement]
                # The bound as a busbw: S / t_bound x the bus factor, independent of S.
                bw = rate_bps / LINK_FACTOR[coll](hosts) * BUS_FACTOR[coll](n) / 1e9
                ax.axhline(bw, color="k", linestyle="--", linewidth=0.8, label="link bound")
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(xfmt)
            ax.grid(True, alpha=0.3)
            ax.set_title(f"{coll}, {placement_title(placement)}", fontsize=9)
            if pi == 0:
                ax.set_ylabel("busbw (GB/s)")
            if ci == len(colls) - 1:
                ax.set_xlabel("size (B)")
            if rows:
                ax.legend(fontsize=7)
    save(fig, "compare-peers.png")

    fig, axes = plt.subplots(1, len(colls), squeeze=False, figsize=(4.2 * len(colls), 3.2))
    for ci, coll in enumerate(colls):
        ax = axes[0][ci]
        for placement in placements:
            rows = groups.get((placement, coll), {})
            braid = rows.get("braid", {})
            pts = []
            for b in sorted(braid):
                vs = braid_vs_peers(rows, b)
                if vs:
                    pts.append((b, vs[0]))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".",
                        label=placement_title(placement))
        ax.axhline(1.0, color="k", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(xfmt)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{coll}: braid time / best peer", fontsize=9)
        ax.set_xlabel("size (B)")
        if ci == 0:
            ax.set_ylabel("time ratio (<1: braid faster)")
        ax.legend(fontsize=7)
    save(fig, "compare-peers-ratio.png")
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl")
    ap.add_argument("--out", default=".")
    ap.add_argument("--inplace", action="store_true")
    ap.add_argument("--rate-Bps", type=float, default=0.0, help="the fabric's link rate, bytes/s")
    ap.add_argument("--rate-text", default="")
    ap.add_argument("--tcp-Bps", type=float, default=0.0,
                    help="TCP's goodput per direction on the fabric (iperf3 --bidir), bytes/s")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    groups, ranks, rtts = load(a.jsonl, a.inplace)
    if not groups:
        print(f"compare_peers.py: no rows in {a.jsonl}", file=sys.stderr)
        return 1
    print("# times in us, busbw in GB/s; braid / best peer: braid's time / the fastest peer's at"
          " that size (<1 = braid faster; against MPI's one-buffer broadcast braid's in-place"
          " time); '-' = no result")
    print_tables(groups, ranks, rtts, a.rate_Bps, a.rate_text or f"{a.rate_Bps:g} B/s", a.tcp_Bps)
    if not a.no_plot:
        any_row = next(iter(next(iter(groups.values())).values()))
        r0 = next(iter(any_row.values()))
        registered = any(r.get("local_register") == 1 for g in groups.values()
                         for r in g.get("braid", {}).values())
        title = (f"braid vs peers, {r0.get('dtype')} {'in' if a.inplace else 'out-of'}-place, "
                 f"{r0.get('cpu', '?')}, {r0.get('cpus', '?')} CPUs"
                 + (", braid's buffers in shared windows (-R 1)" if registered else ""))
        for p in plot(groups, ranks, a.rate_Bps, a.out, title):
            print(f"# plot: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

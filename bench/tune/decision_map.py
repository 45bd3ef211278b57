#!/usr/bin/env python3
"""Draws braid-tune simulate's decision map: per collective, message size (x) by world size (y),
each cell coloured by the algorithm braid's selector chooses there.

    decision_map.py SIM.json OUT.png

SIM.json is what `braid-tune simulate --json` writes (its "map": sizes, and per world size the
choice of every collective at every size). Needs matplotlib (Debian: python3-matplotlib); without
it the script says so and exits 0 without writing anything, so a caller can treat the map as
optional.
"""
import json
import sys


def size_label(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def main(argv):
    if len(argv) != 3:
        print("usage: decision_map.py SIM.json OUT.png", file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch
    except ImportError:
        print("decision_map.py: matplotlib is not installed (Debian: apt install "
              "python3-matplotlib); no decision map written", file=sys.stderr)
        return 0

    with open(argv[1]) as f:
        sim = json.load(f)
    m = sim["map"]
    sizes = m["sizes"]
    worlds = m["worlds"]
    # Collectives the table has one algorithm for (broadcast, reduce, all-to-all today) have no
    # choice to map; they are named under the map instead.
    table = sim.get("algorithms", {})
    colls = [c for c in worlds[0]["choices"] if c != "barrier" and len(table.get(c, [0, 0])) > 1]
    single = ["%s: %s" % (c, table[c][0]) for c in worlds[0]["choices"]
              if c != "barrier" and c in table and len(table[c]) == 1]
    if not colls or not sizes:
        print("decision_map.py: nothing to draw", file=sys.stderr)
        return 1
    names = sorted({a for w in worlds for c in colls for a in w["choices"][c]})
    code = {a: i for i, a in enumerate(names)}
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    cmap = ListedColormap([palette(i) for i in range(len(names))])

    ncols = 2 if len(colls) > 1 else 1
    nrows = (len(colls) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.5 * ncols, 0.32 * len(worlds) * nrows + 2.2),
                             squeeze=False)
    fab = sim["fabric"]
    for k, coll in enumerate(colls):
        ax = axes[k // ncols][k % ncols]
        grid = [[code[a] for a in w["choices"][coll]] for w in worlds]
        ax.imshow(grid, aspect="auto", origin="lower", cmap=cmap, vmin=-0.5,
                  vmax=len(names) - 0.5, interpolation="nearest")
        step = max(1, len(sizes) // 10)
        ax.set_xticks(range(0, len(sizes), step))
        ax.set_xticklabels([size_label(sizes[i]) for i in range(0, len(sizes), step)],
                           rotation=45, fontsize=8)
        ax.set_yticks(range(len(worlds)))
        ax.set_yticklabels(["%d (%dx%d)" % (w["ranks"], w["hosts"], m["ranks_per_host"])
                            for w in worlds], fontsize=7)
        for i, w in enumerate(worlds):
            if w["hosts"] == fab["hosts"]:
                ax.axhline(i, color="black", linewidth=0.8, linestyle="--")
        ax.set_title(coll)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("ranks (hosts x ranks per host)")
    for k in range(len(colls), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    fig.legend(handles=[Patch(color=cmap(code[a]), label=a) for a in names], loc="lower center",
               ncol=min(len(names), 7), fontsize=9)
    title = ("braid's choice per size and world size (dashed: the described fabric, %d hosts x %d); "
             "%s" % (fab["hosts"], fab["ranks_per_host"], fab["origin"]))
    if single:
        title += "\none algorithm in the table: " + ", ".join(single)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.94))
    fig.savefig(argv[2], dpi=110)
    print("decision_map.py: wrote %s" % argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

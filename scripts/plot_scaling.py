#!/usr/bin/python3
"""plot_scaling.py DIR - draws the scaling sweep of scripts/scaling.sh from DIR/medians.csv.

Writes into DIR:
  speedup.png     speedup against workers (nodes x ranks x threads), one line per thread count and
                  mode (strong: T1/Tp; weak: scaled speedup P*T1/Tp), with the ideal line; with
                  several node counts, also one line per ranks x threads with the nodes varied,
                  and the marker's shape says the node count
  efficiency.png  parallel efficiency against workers
  breakdown.png   median time per phase (read, compute, communicate, write, idle; mean over
                  ranks, from the --report JSON) for every configuration, stacked
Oversubscribed configurations (more workers than cores) are drawn hollow and marked "*";
the breakdown labels configurations NODESn RANKSxTHREADS;
failed ones are listed on the breakdown. Needs Debian's python3-matplotlib (Agg backend).
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

PHASES = ("read", "compute", "communicate", "write", "idle")
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8c8c8c")


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["ranks"], r["threads"], r["workers"] = int(r["ranks"]), int(r["threads"]), int(r["workers"])
        # Sweeps from before --nodes ran on one node.
        r["nodes"] = int(r.get("nodes") or 1)
        r["per_node"] = int(r.get("ranks_per_node") or r["ranks"])
        r["over"] = r.get("oversubscribed") == "1"
    return rows


MARKERS = {1: "o", 2: "s", 3: "D", 4: "^", 8: "v"}


def marker(nodes):
    """The marker shape that says how many nodes a point ran on."""
    return MARKERS.get(nodes, "P")


def curve_plot(rows, column, ylabel, title, path, ideal):
    """One panel per mode; solid lines vary the threads at a fixed rank count, dashed lines
    vary the ranks at a fixed thread count."""
    modes = [m for m in ("strong", "weak") if any(r["mode"] == m for r in rows)] or ["strong"]
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        mine = [r for r in rows if r["mode"] == mode]
        one = [r for r in mine if r["nodes"] == 1]
        series = [(f"{p} rank(s), threads varied", "-", [r for r in one if r["ranks"] == p])
                  for p in sorted({r["ranks"] for r in one})]
        series += [(f"{t} thread(s)/rank, ranks varied", "--", [r for r in one if r["threads"] == t])
                   for t in sorted({r["threads"] for r in one})]
        node_counts = sorted({r["nodes"] for r in mine})
        if len(node_counts) > 1:
            series += [(f"{p} rank(s)/node x {t} thread(s), nodes varied", "-.",
                        [r for r in mine if (r["per_node"], r["threads"]) == (p, t)])
                       for p, t in sorted({(r["per_node"], r["threads"]) for r in mine})]
        drawn = False
        for label, style, rs in series:
            pts = sorted((r["workers"], number(r[column]), r["over"], r["nodes"]) for r in rs if number(r[column]) is not None)
            if not pts:
                continue
            drawn = True
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
            for x, y, over, nodes in pts:
                ax.plot([x], [y], marker(nodes), color=line.get_color(), markerfacecolor="none" if over else line.get_color())
                if over:
                    ax.annotate("*", (x, y), textcoords="offset points", xytext=(4, 4))
        if len(node_counts) > 1:
            for nodes in node_counts:
                ax.plot([], [], marker(nodes), color="gray", linestyle="none", label=f"{nodes} node(s)")
        workers = sorted({r["workers"] for r in mine}) or [1]
        ax.plot(workers, [ideal(w) for w in workers], ":", color="black", label="ideal")
        failed = sorted({f"{r['nodes']}n {r['per_node']}x{r['threads']}" for r in mine if number(r[column]) is None})
        if not drawn:
            ax.text(0.5, 0.5, "no successful runs", transform=ax.transAxes, ha="center", fontsize=14)
        ax.set_xlabel("workers = nodes x MPI ranks per node x OpenMP threads")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{mode}: {title}" + (f"\nno data (failed): {', '.join(failed)}" if failed else ""), fontsize=10)
        ax.set_xticks(workers)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="hollow, * = oversubscribed", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def breakdown_plot(rows, path):
    modes = [m for m in ("strong", "weak") if any(r["mode"] == m for r in rows)] or ["strong"]
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        configs = sorted((r for r in rows if r["mode"] == mode), key=lambda r: (r["nodes"], r["per_node"], r["threads"]))
        labels, failed = [], []
        bottoms = [0.0] * len(configs)
        for i, r in enumerate(configs):
            labels.append(f"{r['nodes']}n {r['per_node']}x{r['threads']}" + ("*" if r["over"] else ""))
            if r["status"] == "failed":
                failed.append(labels[-1])
        for phase, colour in zip(PHASES, COLOURS):
            values = [number(r[phase]) or 0.0 for r in configs]
            ax.bar(range(len(configs)), values, bottom=bottoms, color=colour, label=phase)
            bottoms = [b + v for b, v in zip(bottoms, values)]
        for i, r in enumerate(configs):
            if r["status"] == "failed":
                ax.text(i, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=8, color="red")
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(labels, rotation=45 if len(labels) > 8 else 0, fontsize=8)
        ax.set_xlabel("nodes, ranks per node x threads (* = oversubscribed)")
        ax.set_ylabel("seconds (median; mean over ranks)")
        ax.set_title(f"{mode} scaling: time by phase" + (f"\nfailed: {', '.join(failed)}" if failed else ""),
                     fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    path = os.path.join(out, "medians.csv")
    if not os.path.exists(path):
        print(f"plot_scaling: {path} not found (run scripts/scaling.sh --out {out} first)", file=sys.stderr)
        return 2
    rows = load(path)
    curve_plot(rows, "speedup", "speedup (weak: scaled speedup)", "speedup vs 1 node x 1 rank x 1 thread",
               os.path.join(out, "speedup.png"), ideal=lambda w: w)
    curve_plot(rows, "efficiency", "parallel efficiency", "efficiency vs 1 node x 1 rank x 1 thread",
               os.path.join(out, "efficiency.png"), ideal=lambda w: 1.0)
    breakdown_plot(rows, os.path.join(out, "breakdown.png"))
    print(f"plot_scaling: wrote {out}/speedup.png, efficiency.png, breakdown.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The report's plot: ``python -m bench.plot <spec.json>`` (needs matplotlib).

Runs under whichever interpreter has matplotlib (the report asks the peers' environment, where
``requirements-peers.txt`` installs it). The spec names the output file and, per system, the
points (session length in messages, seconds per save) to draw on log-log axes.
"""

from __future__ import annotations

import json
import sys


def main(spec_path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    colors = plt.get_cmap("tab20").colors
    sizes: set[int] = set()
    for i, (label, points) in enumerate(spec["series"].items()):
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        sizes.update(xs)
        ours = label.startswith("agentledger")
        ax.plot(
            xs,
            [y * 1e3 for y in ys],
            "-" if ours else "--",
            marker="o" if ours else "s",
            color=colors[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20],
            linewidth=2.2 if ours else 1.4,
            label=label,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlabel("session length (messages)")
    ax.set_ylabel("time to persist one appended turn (ms)")
    ax.set_title(spec["title"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(spec["out"])


if __name__ == "__main__":
    main(sys.argv[1])

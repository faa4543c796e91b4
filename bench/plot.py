"""The report's plot: ``python -m bench.plot <spec.json>`` (needs matplotlib).

Runs under whichever interpreter has matplotlib (the report asks the peers' environment, where
``requirements-peers.txt`` installs it). The spec names the output file and, per system, the
points (session length in messages, seconds per save) to draw on log-log axes. A spec with
``panels`` (each a ``title`` and its ``series``) draws one set of axes per panel, two to a row,
sharing one legend (``bench.shifts`` draws a panel per shift); ``ylabel`` overrides the axis label.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(spec_path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    ylabel = spec.get("ylabel", "time to persist one appended turn (ms)")
    panels = spec.get("panels")
    if panels is None:
        fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
        _draw(plt, ax, spec["series"], ylabel)
        ax.set_title(spec["title"])
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    else:
        rows = (len(panels) + 1) // 2
        fig, axes = plt.subplots(rows, 2, figsize=(13, 4.2 * rows), dpi=110, squeeze=False)
        for ax, panel in zip(axes.flat, panels, strict=False):
            _draw(plt, ax, panel["series"], ylabel)
            ax.set_title(panel["title"], fontsize=10)
        for ax in list(axes.flat)[len(panels) :]:
            ax.set_visible(False)
        lines: dict[str, Any] = {}  # every panel's lines, one legend entry per system
        for ax in axes.flat:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                lines.setdefault(label, handle)
        labels = list(lines)
        fig.suptitle(spec["title"])
        handles = list(lines.values())
        fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=3, frameon=False)
        fig.tight_layout(rect=(0, 0.06 + 0.02 * (len(labels) // 3), 1, 1))
        fig.savefig(spec["out"])
        return
    fig.tight_layout()
    fig.savefig(spec["out"])


def _draw(plt: Any, ax: Any, series: dict[str, list[list[float]]], ylabel: str) -> None:
    """One system per line on log-log axes: session length against milliseconds."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    colors = plt.get_cmap("tab20").colors
    sizes: set[int] = set()
    for i, (label, points) in enumerate(series.items()):
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
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)


if __name__ == "__main__":
    main(sys.argv[1])

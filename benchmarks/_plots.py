"""The report's plots, drawn from the same summarized runs as its tables (SVG, byte-stable for one input)."""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from benchmarks._config import Row

__all__ = ["scale_plot", "throughput_plot"]

COLORS = {"ours": "tab:blue", "upstream": "tab:orange", "mosaic": "tab:green"}
TITLES = {"ours": "ours", "upstream": "upstream 0.2.76", "mosaic": "mosaic 0.13.0"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "litdata-benchmarks", "svg.fonttype": "none", "font.size": 9})
    return plt


def _save(fig: Any, path: Path) -> None:
    """Write the figure under a temp name, then rename: a reader never sees half an image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    fig.savefig(temp, format="svg", metadata={"Date": None}, bbox_inches="tight")
    os.replace(temp, path)


def throughput_plot(path: Path, rows: list[Row], medians: dict[tuple[str, str], float], libs: list[str]) -> bool:
    """Each row's median rate per library, relative to upstream's (upstream = 1), as horizontal bars.

    Rows that only ours runs (or where upstream has no median) are left out: there is nothing to
    put them against. Returns whether a plot was written.
    """
    shown = [row for row in rows if (row.name, "upstream") in medians and (row.name, "ours") in medians]
    if not shown:
        return False
    plt = _pyplot()
    height = 0.8 / len(libs)
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(shown) + 1.2))
    largest = 1.0
    for i, lib in enumerate(libs):
        ys, xs = [], []
        for j, row in enumerate(shown):
            value = medians.get((row.name, lib))
            if value:
                ys.append(len(shown) - 1 - j + (len(libs) / 2 - i - 0.5) * height)
                xs.append(value / medians[(row.name, "upstream")])
        ax.barh(ys, xs, height=height, color=COLORS[lib], label=TITLES[lib])
        largest = max([largest, *xs])
        for y, x in zip(ys, xs, strict=True):
            ax.text(x, y, f" {x:.2f}x", va="center", fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlim(0, 1.15 * largest)
    ax.set_yticks(range(len(shown)), [row.name for row in reversed(shown)])
    ax.set_xlabel("throughput relative to upstream 0.2.76 (medians of the rounds; right is faster)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(libs), fontsize=7, frameon=False)
    _save(fig, path)
    plt.close(fig)
    return True


def scale_plot(path: Path, records: list[dict[str, Any]]) -> bool:
    """The scale row's curves: open CPU and epoch CPU per chunk against the number of chunks, per library."""
    runs = [r for r in records if r.get("row") == "scale-small-chunks" and r.get("ok")]
    if not runs:
        return False
    plt = _pyplot()
    from matplotlib import ticker

    panels = (("open_cpu_s", "open: CPU seconds", 1.0), ("us_per_chunk", "one epoch (w0): CPU us per chunk", 1.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(8.0, 3.0))
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        for lib in ("ours", "upstream"):
            values: dict[int, list[float]] = {}
            for run in runs:
                if run["lib"] == lib:
                    for size, value in run.get(key, {}).items():
                        values.setdefault(int(size), []).append(float(value) * scale)
            if values:
                sizes = sorted(values)
                medians = [statistics.median(values[size]) for size in sizes]
                ax.plot(sizes, medians, marker="o", color=COLORS[lib], label=TITLES[lib])
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
            axis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("chunks in the dataset")
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True

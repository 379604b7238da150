"""Plot the growth measured by ``benchmarks/scale.py``: open time, per-epoch overhead and memory, ours vs upstream.

Usage (from the repository root, after ``scale.py`` ran)::

    uv run python -m benchmarks.scale_plot                       # benchmarks/out/scale/scale.png from the latest runs
    uv run python -m benchmarks.scale_plot --ours after --upstream after --before before --out /tmp/scale.png

It reads ``benchmarks/out/scale/results.jsonl`` (one record per ``scale.py`` run), takes ours from
the records labelled ``--ours``, upstream from those labelled ``--upstream`` and, if there are
some, ours at an older commit from those labelled ``--before`` (a later run's values replace an
earlier one's), and draws each metric over the number of chunks on log-log axes, with the
fitted growth exponent (``scale.exponent``: the slope of log(value) over log(chunks)) in the
legend. matplotlib is in the workspace's dev dependencies.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.scale import OUT, exponent

# (metric key, panel title, y label, scale applied to the value)
PANELS = (
    ("open_cpu_s", "open: StreamingDataset(dir, shuffle=True) + len()", "CPU seconds", 1.0),
    ("epoch_w0_cpu_s", "per-epoch overhead: one epoch, num_workers=0", "CPU seconds", 1.0),
    ("epoch_w2_all_cpu_s", "per-epoch overhead: one epoch, num_workers=2", "CPU seconds (main + workers)", 1.0),
    ("open_rss_mb", "memory: peak RSS after open", "MiB", 1.0),
)
STYLES = {"ours": ("tab:blue", "o", "-"), "upstream": ("tab:orange", "s", "-"), "ours before": ("tab:gray", "^", "--")}


def _latest(records: list[dict[str, Any]], label: str) -> dict[str, Any] | None:
    """The runs labelled ``label`` merged, a later run's values replacing an earlier one's."""
    found = [r for r in records if r.get("label") == label]
    if not found:
        return None
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for record in found:
        for lib, sizes in record["results"].items():
            for size, values in sizes.items():
                merged.setdefault(lib, {}).setdefault(str(size), {}).update(values)
    return {"label": label, "when": found[-1].get("when", ""), "results": merged}


def _series(record: dict[str, Any], lib: str, metric: str) -> list[tuple[int, float]]:
    points = []
    for size, values in sorted(record["results"].get(lib, {}).items(), key=lambda kv: int(kv[0])):
        value = values.get(metric)
        if value:
            points.append((int(size), float(value)))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ours", default="after-ours", help="label of the run with ours")
    parser.add_argument("--upstream", default="after", help="label of the run with upstream")
    parser.add_argument("--before", default="before", help="label of ours at an older commit (optional)")
    parser.add_argument("--out", type=Path, default=OUT / "scale.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in (OUT / "results.jsonl").read_text().splitlines() if line.strip()]
    lines: list[tuple[str, dict[str, Any], str]] = []
    for name, label, lib in (("ours", args.ours, "ours"), ("ours before", args.before, "ours"),
                             ("upstream", args.upstream, "upstream")):  # fmt: skip
        record = _latest(records, label)
        if record is not None and record["results"].get(lib):
            lines.append((name, record, lib))
    if not lines:
        raise SystemExit(f"no scale.py runs labelled {args.ours!r} / {args.upstream!r} in {OUT / 'results.jsonl'}")
    when = max(str(record.get("when", "")) for _, record, _ in lines)
    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    for axis, (metric, title, unit, scale) in zip(axes.flat, PANELS):
        for name, record, lib in lines:
            points = _series(record, lib, metric)
            if not points:
                continue
            slope = exponent(points)
            color, marker, style = STYLES[name]
            label = f"{name} (exponent {slope:.2f})" if slope is not None else name
            axis.plot([n for n, _ in points], [v * scale for _, v in points], marker=marker, linestyle=style,
                      color=color, label=label)  # fmt: skip
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("chunks (4 samples each)")
        axis.set_ylabel(unit)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"Scale (issue 29), measured up to {when}; CPU times are process_time", fontsize=11)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=90)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

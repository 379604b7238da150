"""Turn the per-run results into medians, ratios and the Markdown report."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks._config import Row
from benchmarks._plots import scale_plot, throughput_plot

__all__ = [
    "Cell",
    "baseline_table",
    "machine_info",
    "render",
    "scale_table",
    "summarize",
    "write_report",
    "write_section",
]

# What run.py's cache_work adds to a capped-cache run's record.
CACHE_WORK = ("cap_bytes", "allowed_bytes", "chunks", "gets_per_chunk", "bytes_per_chunk_byte", "cpu_ms_per_chunk")
LIB_TITLES = {"ours": "ours", "upstream": "upstream 0.2.76", "mosaic": "mosaic 0.13.0"}


@dataclass
class Cell:
    """All runs of one library on one row."""

    rates: list[float] = field(default_factory=list)
    elapsed: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    cache: list[float] = field(default_factory=list)
    first_batch: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    incomplete: int = 0
    impl: set[str] = field(default_factory=set)
    s3_client: set[str] = field(default_factory=set)
    cache_work: dict[str, list[float]] = field(default_factory=dict)  # CACHE_WORK -> per-run values
    runs: int = 0
    status: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None


def summarize(records: list[dict[str, Any]]) -> dict[tuple[str, str], Cell]:
    """Group run records (``row``, ``lib`` and the runner's result) into cells."""
    cells: dict[tuple[str, str], Cell] = defaultdict(Cell)
    for rec in records:
        cell = cells[(rec["row"], rec["lib"])]
        cell.runs += 1
        if not rec.get("ok"):
            cell.failures.append(rec.get("status", "error"))
            cell.status = rec.get("status", "error")
            continue
        elapsed = float(rec["elapsed_s"])
        cell.rates.append(rec["items"] / elapsed if elapsed > 0 else 0.0)
        cell.elapsed.append(elapsed)
        cell.rss.append(float(rec.get("rss_peak_mb", 0.0)))
        if "cache_peak_bytes" in rec:
            cell.cache.append(rec["cache_peak_bytes"] / 2**20)
        if rec.get("first_batch_s") is not None:
            cell.first_batch.append(float(rec["first_batch_s"]))
        if rec.get("complete") is False:
            cell.incomplete += 1
        if rec.get("impl"):
            cell.impl.add(rec["impl"])
        if rec.get("s3_client"):
            cell.s3_client.add(rec["s3_client"])
        for key in CACHE_WORK:
            if key in rec:
                cell.cache_work.setdefault(key, []).append(float(rec[key]))
    return cells


def baseline_table(rows: list[Row], records: list[dict[str, Any]], title: str) -> list[str]:
    """Ours against ours at another commit (``--baseline``), row by row.

    Each round ran ours and then the baseline back to back, so besides the ratio of the medians
    the table gives the median of the rounds' own ratios, and their range: the noise of the
    stretch of time the pair shared is in each round's ratio alike for both.
    """
    out = [f"### Against {title} (`--baseline`: the same runner code, run right after ours in every round)", ""]
    out.append("| workload | unit | ours | baseline | ours/baseline (medians) | per-round ratios: median (min-max) |")
    out.append("|---|---|---|---|---|---|")
    for row in rows:
        by_round: dict[str, dict[int, float]] = {"ours": {}, "baseline": {}}
        for rec in records:
            if rec["row"] == row.name and rec["lib"] in by_round and rec.get("ok") and rec["elapsed_s"] > 0:
                by_round[rec["lib"]][rec["round"]] = rec["items"] / rec["elapsed_s"]
        ours, base = by_round["ours"], by_round["baseline"]
        if not ours or not base:
            continue
        pairs = [ours[r] / base[r] for r in sorted(ours.keys() & base.keys())]
        mine, theirs = statistics.median(ours.values()), statistics.median(base.values())
        per_round = "-"
        if pairs:
            per_round = f"{statistics.median(pairs):.3f}x ({min(pairs):.3f}-{max(pairs):.3f}, {len(pairs)} rounds)"
        out.append(f"| {row.name} | {row.unit} | {_si(mine)} | {_si(theirs)} | {_ratio(mine, theirs)} | {per_round} |")
    out.append("")
    return out


def cache_within(cell: Cell) -> bool | None:
    """Whether every run's cache peak stayed within the cap plus one chunk per worker (None: no cap)."""
    allowed = cell.cache_work.get("allowed_bytes")
    if not allowed or len(allowed) != len(cell.cache):
        return None
    return all(peak * 2**20 <= limit for peak, limit in zip(cell.cache, allowed, strict=True))


def _cache_table(rows: list[Row], cells: dict[tuple[str, str], Cell], libs: list[str]) -> list[str]:
    """The capped-cache rows: cache peak against the cap, and the cache's work per chunk."""
    out = ["The cache under a cap (median of the rounds; the peak is sampled every 50 ms):", ""]
    out.append(
        "| workload | library | chunks | cap | cap + 1 chunk/worker | cache peak (max) | within | "
        "GETs per chunk-epoch | bytes fetched per chunk byte | CPU ms per chunk-epoch |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        for lib in libs:
            cell = cells.get((row.name, lib))
            if row.cache_cap is None or cell is None or not cell.cache_work:
                continue
            work = {key: statistics.median(values) for key, values in cell.cache_work.items()}
            within = cache_within(cell)
            out.append(
                f"| {row.name} | {LIB_TITLES[lib]} | {work['chunks']:.0f} | {work['cap_bytes'] / 2**20:.2f} MiB | "
                f"{work['allowed_bytes'] / 2**20:.2f} MiB | {max(cell.cache):.2f} MiB | "
                f"{'yes' if within else 'no'} | {work['gets_per_chunk']:.2f} | {work['bytes_per_chunk_byte']:.2f} | "
                f"{work['cpu_ms_per_chunk']:.1f} |"
            )
    out.append("")
    return out if len(out) > 5 else []  # the heading, the table's head and an empty line: no row had a cap


def _si(value: float) -> str:
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _bytes_rate(value: float) -> str:
    for factor, suffix in ((2**30, "GiB/s"), (2**20, "MiB/s"), (2**10, "KiB/s")):
        if value >= factor:
            return f"{value / factor:.3g} {suffix}"
    return f"{value:.3g} B/s"


def _cell_text(cell: Cell | None, row: Row, lib: str) -> str:
    if lib not in row.libs:
        return "n/a (no equivalent)"
    if cell is None:
        return "not run"
    if not cell.rates:
        return cell.status or "failed"
    text = f"**{_si(statistics.median(cell.rates))}** ({_si(min(cell.rates))}-{_si(max(cell.rates))})"
    notes = []
    if cell.failures:
        counts = {s: cell.failures.count(s) for s in sorted(set(cell.failures))}
        notes += [f"{s} {n}/{cell.runs}" for s, n in counts.items()]
    if cell.incomplete:
        notes.append(f"incomplete epoch {cell.incomplete}/{cell.runs}")
    if cell.impl and any("stand-in" in i for i in cell.impl):
        notes.append("stand-in")
    return text + (f" [{', '.join(notes)}]" if notes else "")


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def _median_text(values: list[float], fmt: str = "{:.1f}") -> str:
    return fmt.format(statistics.median(values)) if values else "-"


def machine_info(root: Path) -> dict[str, str]:
    """The machine and software the suite ran on."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
        ram = f"{mem_kb / 2**20:.1f} GiB"
    except (OSError, StopIteration):
        ram = "unknown"
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "packages"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        commit += " + uncommitted changes" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "ram": ram,
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": version("torch"),
        "numpy": version("numpy"),
        "ours": f"litdata {version('litdata')} (workspace commit {commit})",
    }


@dataclass
class Limits:
    """Workload 8: page-cache read bandwidth per file set, and the S3 server's bandwidth per dataset."""

    page_cache: dict[str, list[float]] = field(default_factory=dict)  # bytes/s
    files_per_s: dict[str, list[float]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    s3: dict[str, list[float]] = field(default_factory=dict)
    noise: dict[str, list[float]] = field(default_factory=dict)  # row -> the reference's elapsed seconds

    def median(self, table: dict[str, list[float]], key: str | None) -> float | None:
        values = table.get(key or "")
        return statistics.median(values) if values else None


def scale_table(records: list[dict[str, Any]], sizes: list[int]) -> list[str]:
    """The scale row's Markdown table: open time and CPU per chunk at each size, ours vs upstream (medians)."""
    runs = [r for r in records if r.get("row") == "scale-small-chunks" and r.get("ok")]
    if not runs:
        return []

    def median(lib: str, key: str, size: int) -> float | None:
        values = [float(r[key][str(size)]) for r in runs if r["lib"] == lib and str(size) in r.get(key, {})]
        return statistics.median(values) if values else None

    out = ["### Scale: many small chunks (medians of the rounds)", ""]
    out.append("| metric | chunks | ours | upstream 0.2.76 | upstream / ours |")
    out.append("|---|---:|---:|---:|---:|")
    for key, title, scale in (("open_s", "open s (wall)", 1.0), ("open_cpu_s", "open CPU s", 1.0),
                              ("us_per_chunk", "epoch CPU us per chunk (w0)", 1.0)):  # fmt: skip
        for size in sizes:
            ours, theirs = median("ours", key, size), median("upstream", key, size)
            ratio = f"{theirs / ours:.2f}x" if ours and theirs else "-"
            cells = [f"{v * scale:.3f}" if v is not None and v < 10 else f"{v * scale:.1f}" if v is not None else "-"
                     for v in (ours, theirs)]  # fmt: skip
            out.append(f"| {title} | {size:,} | {cells[0]} | {cells[1]} | {ratio} |")
    out.append("")
    return out


# The report's families of rows: one table (and one plot) each.
FAMILIES = (
    ("optimize", "Writing a dataset: `optimize`", ("optimize-records", "optimize-images", "optimize-bytes",
                                                    "tokens-optimize")),
    ("local", "Reading from the local disk", ("stream", "tokens-stream", "random-access", "raw-files",
                                              "stream-combined")),
    ("cloud", "Reading from object storage (a local S3 server)", ("stream",)),
)  # fmt: skip


def family_of(row: Row) -> str | None:
    """The family whose table shows ``row`` (None: the scale row, which has its own table)."""
    for key, _, kinds in FAMILIES:
        if row.kind in kinds and (key == "cloud") == row.s3:
            return key
    return None


def _limit_rate(row: Row, limits: Limits, row_files: dict[tuple[str, str], tuple[str | None, float | None]]) -> str:
    """The machine's limit for ``row`` in the row's unit: the bandwidth of what it reads over its bytes per item."""
    files, per_item = row_files.get((row.name, "ours"), (None, None))
    limit = limits.median(limits.s3 if row.s3 else limits.page_cache, files)
    if row.kind in ("optimize-records", "optimize-images", "optimize-bytes", "tokens-optimize") or not limit:
        return "-"
    return _si(limit / per_item) if per_item else "-"


def _family_table(
    rows: list[Row],
    cells: dict[tuple[str, str], Cell],
    libs: list[str],
    limits: Limits,
    row_files: dict[tuple[str, str], tuple[str | None, float | None]],
) -> list[str]:
    """One family's throughput table: each library's median (min-max), the ratios, the machine's limit."""
    header = "| workload | unit | rounds | " + " | ".join(LIB_TITLES[lib] for lib in libs)
    ratios = []
    if "ours" in libs and "upstream" in libs:
        ratios.append("ours/upstream")
    if "ours" in libs and len([lib for lib in libs if lib != "ours"]) > 1:
        ratios.append("ours/fastest peer")
    out = [header + " | " + " | ".join([*ratios, "machine limit"]) + " |"]
    out.append("|---|---|---|" + "---|" * (len(libs) + len(ratios) + 1))
    for row in rows:
        texts = [_cell_text(cells.get((row.name, lib)), row, lib) for lib in libs]
        mine = cells[(row.name, "ours")].median if (row.name, "ours") in cells else None
        extra = []
        if "ours/upstream" in ratios:
            up = cells[(row.name, "upstream")].median if (row.name, "upstream") in cells else None
            extra.append(_ratio(mine, up))
        if "ours/fastest peer" in ratios:
            peers = [
                cells[(row.name, lib)].median
                for lib in libs
                if lib != "ours" and (row.name, lib) in cells and cells[(row.name, lib)].median is not None
            ]
            extra.append(_ratio(mine, max(p for p in peers if p is not None)) if peers else "-")
        extra.append(_limit_rate(row, limits, row_files))
        runs = max((cells[(row.name, lib)].runs for lib in libs if (row.name, lib) in cells), default=0)
        out.append(f"| {row.name} | {row.unit} | {runs} | " + " | ".join(texts + extra) + " |")
    out.append("")
    return out


def render(
    rows: list[Row],
    cells: dict[tuple[str, str], Cell],
    limits: Limits,
    row_files: dict[tuple[str, str], tuple[str | None, float | None]],
    context: dict[str, Any],
) -> str:
    """The generated part of ``docs/benchmarks.md``: the run, a table and a plot per family, memory, goals, scale.

    Args:
        rows: the rows run.
        cells: the summarized runs.
        limits: workload 8.
        row_files: (row, lib) -> (the file set or S3 dataset it reads, its bytes per counted item).
        context: machine, mode, rounds, libs, notes, the run's ``records``, ``images`` (the folder the
            plots go to) and ``image_link`` (how the page links that folder), optional extra
            ``sections`` (lines) before the notes.
    """
    libs: list[str] = context["libs"]
    machine: dict[str, str] = context["machine"]
    images: Path | None = context.get("images")
    out: list[str] = []
    rounds = f"{context['rounds']} round{'s' if context['rounds'] != 1 else ''}"
    if context["mode"] == "quick":
        out.append(
            "**These numbers come from a `--quick` run: tiny inputs, one round, each library's rows in one "
            "process. That is a smoke test of the harness, not a measurement: regenerate this page from a "
            "full run before reading anything into it.**"
        )
        out.append("")
        out.append(f"Run: {machine['date']}, `{context['command']}` (quick, {rounds}).")
    else:
        out.append(
            f"Run: {machine['date']}, `{context['command']}` ({context['mode']}, {rounds}; "
            "rows whose round took under 30 s ran 2 more)."
        )
    out.append("")
    out.append("| machine | |")
    out.append("|---|---|")
    for key in ("cpu", "cores", "ram", "os", "python", "torch", "numpy", "ours"):
        out.append(f"| {key} | {machine[key]} |")
    out.append("| upstream | litdata 0.2.76 (PyPI), side venv `.side-venvs/bench-litdata-0.2.76` |")
    out.append("| mosaic | mosaicml-streaming 0.13.0 (PyPI), side venv `.side-venvs/bench-mosaic-0.13.0` |")
    out.append("")
    out.append(
        "Each cell: the median rate of the rounds (higher is better), min-max in brackets. The ratios are of "
        "medians of this run. *Machine limit*: the rate at which this machine's page cache (or, for object "
        "storage, the S3 server alone) delivers the bytes the row reads; no library can beat it."
    )
    out.append("")

    medians = {key: cell.median for key, cell in cells.items() if cell.median is not None}
    records: list[dict[str, Any]] = context.get("records", [])
    scale = scale_table(records, context.get("scale_sizes", []))
    for key, title, _ in FAMILIES:
        family = [row for row in rows if family_of(row) == key]
        if not family and not (key == "local" and scale):
            continue
        out.append(f"## {title}")
        out.append("")
        if family:
            out.extend(_family_table(family, cells, libs, limits, row_files))
        if family and images is not None and throughput_plot(images / f"benchmarks-{key}.svg", family, medians, libs):
            out.append(f"![{title}: throughput relative to upstream]({context['image_link']}/benchmarks-{key}.svg)")
            out.append("")
        if key == "local" and scale:  # the scale row reads local datasets of many small chunks
            out.extend(scale)
            if images is not None and scale_plot(images / "benchmarks-scale.svg", records):
                link = f"{context['image_link']}/benchmarks-scale.svg"
                out.append(f"![open and per-chunk CPU against the number of chunks]({link})")
                out.append("")

    out.append("## Memory")
    out.append("")
    out.append(
        "Peak memory, median MiB: the summed PSS of the run's process tree, workers included, sampled every 50 ms."
    )
    out.append("")
    out.append("| workload | " + " | ".join(LIB_TITLES[lib] for lib in libs) + " |")
    out.append("|---|" + "---|" * len(libs))
    for row in rows:
        texts = []
        for lib in libs:
            cell = cells.get((row.name, lib))
            if cell is None or not cell.rss:
                texts.append("-")
                continue
            text = _median_text(cell.rss, "{:.0f}")
            if cell.cache:
                text += f" (cache peak {_median_text(cell.cache, '{:.0f}')} MiB)"
            texts.append(text)
        out.append(f"| {row.name} | " + " | ".join(texts) + " |")
    out.append("")
    if any(row.cache_cap is not None for row in rows):
        out.extend(_cache_table(rows, cells, libs))

    if "ours" in libs and len(libs) > 1:
        out.append("## Against the project's goals")
        out.append("")
        out.extend(_targets(rows, cells, libs, limits))

    out.extend(context.get("sections", []))  # e.g. the --baseline table

    out.append("## Notes on this run")
    out.append("")
    for note in context["notes"]:
        out.append(f"- {note}")
    stand_ins = sorted(
        {(row.name, impl) for row in rows for impl in _impls(cells, row.name, "ours") if "stand-in" in impl}
    )
    for name, impl in stand_ins:
        out.append(f"- {name}, ours: {impl}.")
    for lib in libs:
        clients = sorted({c for row in rows if row.s3 for c in getattr(cells.get((row.name, lib)), "s3_client", set())})
        if clients:
            out.append(f"- S3 client of {LIB_TITLES[lib]}: {'; '.join(clients)}.")
    return "\n".join(out)


def _impls(cells: dict[tuple[str, str], Cell], row: str, lib: str) -> set[str]:
    cell = cells.get((row, lib))
    return cell.impl if cell is not None else set()


def spread(values: list[float]) -> float:
    """Half the min-max range over the median: the run-to-run spread the goals speak of."""
    return (max(values) - min(values)) / (2 * statistics.median(values))


def _targets(rows: list[Row], cells: dict[tuple[str, str], Cell], libs: list[str], limits: Limits) -> list[str]:
    """Issues 6, 16 and 32's goals, row by row: the ratio asked, the ratio measured, and the peak-RSS goal.

    Where a row has a spread goal that the machine's own noise (the reference run in the same
    rounds) already exceeds, the goal is above what the machine can show: it says so, with both
    numbers, instead of a bare "no"."""
    out = []
    out.append("| workload | goal: ours at least | measured | met | peak RSS: ours vs leanest peer + 10% | met |")
    out.append("|---|---|---|---|---|---|")
    for row in rows:
        if row.target is None:
            continue
        mine = cells.get((row.name, "ours"))
        peers = [cells[(row.name, lib)] for lib in libs if lib != "ours" and (row.name, lib) in cells]
        if row.against == "upstream":
            chosen = [cells[(row.name, "upstream")]] if (row.name, "upstream") in cells else []
        else:
            chosen = peers
        rates = [c.median for c in chosen if c.median is not None]
        measured, met = "-", "-"
        if mine is not None and mine.median is not None and rates:
            ratio = mine.median / max(rates)
            measured, met = f"{ratio:.2f}x", "yes" if ratio >= row.target else "no"
            if row.spread is not None and mine.rates:
                own = spread(mine.rates)
                seconds = limits.noise.get(row.name)
                floor = spread([1 / s for s in seconds]) if seconds else None  # of rates, as ours
                measured += f", spread +-{100 * own:.0f}%"
                if floor is not None:
                    measured += f" (machine-noise reference in the same rounds: +-{100 * floor:.0f}%)"
                if ratio < row.target:
                    met = "no"
                elif own < row.spread:
                    met = "yes"
                elif floor is not None and floor >= row.spread and own <= floor:
                    met = f"no: +-{100 * row.spread:.0f}% is below this machine's own noise; ours is within it"
                else:
                    met = "no"
        if row.cache_cap is not None and mine is not None and cache_within(mine) is False:
            met = "no (the cache outgrew its cap + one chunk per worker)"
        if row.name == "stream-s3-cold-w2" and any(c.failures for c in ([mine] if mine else [])):
            met = "no (a run failed or stalled)"
        rss_text, rss_met = "-", "-"
        peer_rss = [statistics.median(c.rss) for c in peers if c.rss]
        if row.streaming and mine is not None and mine.rss and peer_rss:
            own, lean = statistics.median(mine.rss), min(peer_rss)
            rss_text = f"{own:.0f} vs {1.1 * lean:.0f} MiB"
            rss_met = "yes" if own <= 1.1 * lean else "no"
        goal = f"{row.target:g}x {row.against}"
        out.append(f"| {row.name} | {goal} | {measured} | {met} | {rss_text} | {rss_met} |")
    out.append("")
    return out


PHASES = "optimize_phases"
_NOT_YET = "Not measured yet: run `uv run python -m benchmarks.optimize_phases --page`."


def _block(name: str, body: str) -> str:
    return f"<!-- {name}: begin -->\n{body.strip()}\n<!-- {name}: end -->"


def _existing_block(page: Path, name: str) -> str | None:
    text = page.read_text() if page.exists() else ""
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    if begin not in text or end not in text:
        return None
    return text[text.index(begin) : text.index(end) + len(end)]


def _replace_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def write_report(path: Path, generated: str, template: str) -> None:
    """Write the whole page: ``template`` with ``{results}`` replaced by ``generated``; the optimize-by-phase
    section, which ``benchmarks.optimize_phases --page`` writes, is kept from the page as it was."""
    phases = _existing_block(path, PHASES) or _block(PHASES, _NOT_YET)
    _replace_atomically(path, template.replace("{results}", generated).replace("{" + PHASES + "}", phases))


def write_section(path: Path, name: str, body: str) -> None:
    """Replace one generated section of the page at ``path``; the page must already have it."""
    old = _existing_block(path, name)
    if old is None:
        raise SystemExit(f"{path} has no section <!-- {name}: begin -->; regenerate the page with benchmarks.run")
    _replace_atomically(path, path.read_text().replace(old, _block(name, body)))

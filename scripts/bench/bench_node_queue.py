"""The path upstream LitData's docs give for its shared-queue benchmark: runs ``benchmarks/node_queue.py``.

uv run python scripts/bench/bench_node_queue.py --files 4000 --workers 8
uv run python scripts/bench/bench_node_queue.py --files 200 --workers 4 --io-matrix
"""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "node_queue.py"), run_name="__main__")

"""The path upstream LitData's docs give for its shared-queue benchmark: runs ``python -m benchmarks.node_queue``.

uv run python scripts/bench/bench_node_queue.py --files 4000 --workers 8
uv run python scripts/bench/bench_node_queue.py --files 200 --workers 4 --io-matrix
"""

import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]  # where ``benchmarks`` is importable as a package
    command = [sys.executable, "-m", "benchmarks.node_queue", *sys.argv[1:]]
    sys.exit(subprocess.run(command, cwd=root, check=False).returncode)

"""One ``optimize`` job for the concurrent-output tests: ``python -m tests.scripts.concurrent_optimize SPEC_JSON``.

The spec: ``output`` (a folder or URL), ``job`` (a name written into every sample), ``mode``
(None, "append" or "overwrite"), ``n`` samples, ``storage_options``, and optionally ``stale_s`` /
``heartbeat_s`` (the output lock's timings, shortened for a test). Each sample takes ``delay``
seconds, so two jobs started together overlap. The last line of stdout is
``{"ok": bool, "error": str | None}``.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from typing import Any


def sample(i: int, job: str, delay: float) -> dict[str, Any]:
    time.sleep(delay)
    return {"job": job, "i": i}


def main() -> None:
    spec = json.loads(sys.argv[1])
    from litdata_prep import _output_lock, optimize

    _output_lock.STALE_S = spec.get("stale_s", _output_lock.STALE_S)
    _output_lock.HEARTBEAT_S = spec.get("heartbeat_s", _output_lock.HEARTBEAT_S)
    try:
        optimize(
            fn=functools.partial(sample, job=spec["job"], delay=spec.get("delay", 0.0)),
            inputs=list(range(spec["n"])),
            output_dir=spec["output"],
            chunk_size=50,
            num_workers=1,
            mode=spec.get("mode"),
            storage_options=spec.get("storage_options"),
            verbose=False,
        )
        print(json.dumps({"ok": True, "error": None}))
    except Exception as err:
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}))


if __name__ == "__main__":
    main()

"""One ``optimize`` job for the concurrent-output tests: ``python -m tests.scripts.concurrent_optimize SPEC_JSON``.

The spec: ``output`` (a folder or URL), ``job`` (a name written into every sample), ``mode``
(None, "append" or "overwrite"), ``n`` samples, ``storage_options``, and optionally ``stale_s`` /
``heartbeat_s`` (the output lock's timings, shortened for a test). Each sample takes ``delay``
seconds, so two jobs started together overlap. The last line of stdout is
``{"ok": bool, "error": str | None}``.

``kind`` picks another job writing the output the same way: ``"map"`` (each input's ``fn`` writes
``{job}-{i}.txt``), ``"merge"`` (``merge_datasets`` of the folders in ``inputs``) or ``"hold"``
(holds the output's lock ``hold_s`` seconds and writes nothing, as a long job would; it
asks for it at ``start_at``, a ``time.time()``, if given).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Any


def sample(i: int, job: str, delay: float) -> dict[str, Any]:
    time.sleep(delay)
    return {"job": job, "i": i}


def write_file(i: int, output_dir: str, job: str, delay: float) -> None:
    time.sleep(delay)
    with open(os.path.join(output_dir, f"{job}-{i}.txt"), "w") as handle:
        handle.write(job)


def run(spec: dict[str, Any]) -> None:
    import litdata_prep as prep

    kind, output, options = spec.get("kind", "optimize"), spec["output"], spec.get("storage_options")
    if kind == "map":
        fn = functools.partial(write_file, job=spec["job"], delay=spec.get("delay", 0.0))
        prep.map(fn, list(range(spec["n"])), output, num_workers=1, storage_options=options, verbose=False)
    elif kind == "merge":
        prep.merge_datasets(spec["inputs"], output, storage_options=options)
    elif kind == "hold":
        from litdata_prep._checks import open_output
        from litdata_prep._output_lock import hold_output

        target = open_output(output, options, "hold")
        time.sleep(max(0.0, spec.get("start_at", 0.0) - time.time()))  # jobs started at one instant
        with hold_output(target, None):
            print("held", time.time(), flush=True)
            time.sleep(spec["hold_s"])
            print("releasing", time.time(), flush=True)
    else:
        prep.optimize(
            fn=functools.partial(sample, job=spec["job"], delay=spec.get("delay", 0.0)),
            inputs=list(range(spec["n"])),
            output_dir=output,
            chunk_size=50,
            num_workers=1,
            mode=spec.get("mode"),
            storage_options=options,
            verbose=False,
        )


def main() -> None:
    spec = json.loads(sys.argv[1])
    from litdata_prep import _output_lock

    _output_lock.STALE_S = spec.get("stale_s", _output_lock.STALE_S)
    _output_lock.HEARTBEAT_S = spec.get("heartbeat_s", _output_lock.HEARTBEAT_S)
    try:
        run(spec)
        print(json.dumps({"ok": True, "error": None}))
    except Exception as err:
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}))


if __name__ == "__main__":
    main()

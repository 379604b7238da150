"""The soak: what a real multi-rank training job does to a bucket, all on loopback (issue 26).

Two jobs stream the same dataset at once, on one machine, through one chunk cache capped by
``max_cache_size``, from a moto S3 bucket behind the fault proxy (latency, dropped, cut and
stalled connections) and a signing checker that refuses keys a few seconds after it issued them:

- the "env" job: ``env_ranks`` ranks that learn their rank from environment variables alone
  (``RANK`` / ``WORLD_SIZE`` as torchrun sets them, or ``GLOBAL_RANK`` / ``NNODES``; no
  torch.distributed), DataLoader workers forked;
- the "gloo" job: ``gloo_ranks`` ranks in a torch.distributed gloo group, workers from a forkserver.

Each rank (``tests/scripts/soak_rank.py``) runs ``workers`` DataLoader workers for ``epochs`` epochs. In
epoch 2 every rank saves its loader's state dict and holds; then one DataLoader worker of env
rank 1 is SIGKILLed (that rank fails, and the job is torn down as torchrun would), the gloo ranks
are SIGKILLed outright (a preemption), and both jobs start again in fresh processes from their
saved state dicts. Optionally (``stop_downloader``) the process downloading a chunk in epoch 1 is
SIGSTOPped for ``stop_s`` seconds (or, with ``stop_min_s``, until the processes that waited on its
downloads were released by a takeover) and SIGCONTed.

What :meth:`SoakReport.problems` checks:

- every sample exactly once per epoch across the ranks of each job (the batches delivered before
  the checkpoint, then those of the resumed run);
- no batch waited longer than the loader's watchdog limit, and no watchdog report, on any rank but
  the one whose process was stopped;
- the cache folder never above ``max_cache_size`` plus what the docs allow for chunks in use
  (``workers x (max_pre_download + 1)`` chunks);
- the signing checker refused no request signed with a key past its time (every process
  refreshed its keys in time), and more keys were issued than processes asked for at start (they
  were refreshed); a request signed in time that arrived after its key's end (a "late arrival":
  the stopped process sent it after its stop) is allowed only in a round that stopped a process,
  and litdata must then sign it again (the exact sample accounting above says it did);
- nothing left behind: no lock, staging or temporary file in the cache, nothing in the jobs'
  ``TMPDIR``, no watchdog board in ``/dev/shm``, no process of any rank's session alive.

The credential source is one pluggable piece: :func:`key_environment`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cred_harness import ROOT, clean_environment
from tests.support.cred_servers import MIN_TTL, CredentialStack, start_credential_stack
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server, free_port
from tests.support.zygote import PythonProcess, start_python

__all__ = ["SoakConfig", "SoakReport", "key_environment", "run_soak"]

RANK_SCRIPT = Path(__file__).parents[1] / "scripts" / "soak_rank.py"
STATIC_KEYS = ("AKIASOAKSTATIC000001", "soak-static-secret")
_ALLOWED_CACHE_FILES = (".cache-bytes", ".source-url", "index.json")


@dataclass
class SoakConfig:
    """What one soak round does. The defaults are the CI test's (a few minutes on 2 cores).

    Attributes:
        samples: samples in the dataset (a multiple of ``chunk_size``).
        chunk_size: samples per chunk.
        batch_size: samples per batch.
        workers: DataLoader workers per rank.
        epochs: epochs each job streams (>= 3: the checkpoint is in epoch 2).
        env_ranks: ranks of the job launched by environment variables alone.
        gloo_ranks: ranks of the torch.distributed (gloo) job.
        rank_variable: ``"RANK"`` (torchrun's) or ``"GLOBAL_RANK"`` (with ``NNODES``, as upstream
            LitData reads it) for the env job.
        keys: the credential source, see :func:`key_environment`.
        key_ttl_s: the keys must be replaced after this many seconds (they advertise
            ``MIN_TTL + key_ttl_s``: a client refreshing ``MIN_TTL`` before expiry does).
        key_grace_s: the checker refuses a key ``key_ttl_s + key_grace_s`` after issuing it.
        latency: seconds every answer's first byte is held back.
        fault_gap: mean chunk GETs between two scripted faults.
        stall_s: how long a stalled connection hangs (then it is reset).
        io_timeout: the storage's ``timeout`` (no progress for this long: retry).
        watchdog_s: the loader's watchdog limit; no batch may wait longer.
        checkpoint_batch: the batch of epoch 2 after which each rank saves its state.
        step_s: seconds each rank's training step takes.
        cache_chunks: ``max_cache_size`` in chunks (plus the index).
        max_pre_download: chunks each worker fetches ahead.
        kill_worker: SIGKILL a DataLoader worker of env rank 1 after the checkpoint.
        stop_downloader: SIGSTOP the process downloading a chunk in epoch 1 for ``stop_s`` seconds.
        stop_s: how long it stays stopped (longer while another process waits on one of its locks,
            until that wait exceeds ``watchdog_s``: without a takeover its rank then stalls).
        stop_min_s: end the stop sooner, once it lasted this long, some process waited on one of
            its locks, and none waits any more or every lock waited on was taken over: only a
            takeover can release a waiter while the holder is stopped, so what the stop is for has
            happened (None: always ``stop_s``).
        deadline_s: the bound on every wait (a rank exits with its stacks after it).
        seed: the fault schedule's seed.
        revoke_every_s: revoke every key issued so far this often (0: never): the ranks must fetch
            new keys from their source when the bucket refuses theirs (403 ``InvalidAccessKeyId``).
        optimize_jobs: ``optimize`` jobs started at once, during the streaming, into one bucket
            output (``mode="append"``), with the ranks' keys through the same proxy: they must run
            one after the other (the output's lock), and the output hold every job's samples.
        optimize_samples: samples each optimize job writes.
        extra_env: more environment variables for every rank (e.g. a takeover bound).
        allow_killed_leftovers: tolerate what a torn-down rank is known to leave behind in its
            ``TMPDIR``: CPython's ``pymp-*`` folders (not litdata's; only a clean exit of their
            process removes them); they are listed in ``known_leftovers``. litdata's own files (an
            epoch record, a watchdog board) of a SIGKILLed rank are never tolerated: the resumed
            rank, in the same ``TMPDIR``, sweeps them when it starts.
    """

    samples: int = 1024
    chunk_size: int = 8
    batch_size: int = 4
    workers: int = 2
    epochs: int = 3
    env_ranks: int = 4
    gloo_ranks: int = 2
    rank_variable: str = "RANK"
    keys: str = "imds"
    key_ttl_s: float = 1.0
    key_grace_s: float = 3.0
    latency: float = 0.02
    fault_gap: int = 25
    stall_s: float = 4.0
    io_timeout: float = 2.0
    watchdog_s: float = 60.0
    checkpoint_batch: int = 2
    step_s: float = 0.005
    cache_chunks: int = 24
    max_pre_download: int = 1
    kill_worker: bool = True
    stop_downloader: bool = False
    stop_s: float = 75.0
    stop_min_s: float | None = None
    deadline_s: float = 170.0
    seed: int = 0
    revoke_every_s: float = 0.0
    optimize_jobs: int = 0
    optimize_samples: int = 200
    extra_env: dict[str, str] = field(default_factory=dict)
    allow_killed_leftovers: bool = True


@dataclass
class _Rank:
    job: str
    rank: int
    run: int
    proc: PythonProcess
    events: Path
    stderr: Path
    release: Path

    @property
    def name(self) -> str:
        return f"{self.job}-r{self.rank}-run{self.run}"

    def records(self) -> list[dict[str, Any]]:
        found = []
        with contextlib.suppress(FileNotFoundError):
            for line in self.events.read_text().splitlines():
                with contextlib.suppress(ValueError):  # a line cut by SIGKILL
                    found.append(json.loads(line))
        return found

    def error(self) -> str:
        """The end of the process's stderr, after the lines before it that tell of a failure or a warning
        (a traceback fills the end; a warning logged minutes earlier, such as stale keys served, explains it)."""
        with contextlib.suppress(FileNotFoundError):
            text = self.stderr.read_text(errors="replace")
            head, tail = text[:-3000], text[-3000:]
            before = [line for line in head.splitlines() if any(w in line.lower() for w in _TELLING)]
            return "\n".join([*before[-10:], tail])
        return ""


_TELLING = ("warn", "fail", "refus", "expired", "stale")


@dataclass
class SoakReport:
    """What a soak round saw (:meth:`problems` lists what it did wrong)."""

    config: SoakConfig
    seconds: float = 0.0
    epochs: dict[str, dict[int, list[int]]] = field(default_factory=dict)  # job: epoch: ids delivered
    max_wait: dict[str, float] = field(default_factory=dict)  # rank run: longest wait for a batch
    stall_reports: dict[str, list[str]] = field(default_factory=dict)
    exempt: set[str] = field(default_factory=set)  # rank runs whose own process was stopped
    stopped: dict[str, Any] = field(default_factory=dict)
    killed_worker: dict[str, Any] = field(default_factory=dict)
    peak_cache: int = 0
    cache_limit: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    keys_issued: int = 0
    revocations: int = 0  # keys revoked while the round ran
    optimize: dict[str, Any] = field(default_factory=dict)  # the optimize jobs: their results, the output's samples
    refusals: list[Any] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    known_leftovers: list[str] = field(default_factory=list)  # tolerated while allow_killed_leftovers
    errors: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Everything this round did wrong, one line (or paragraph) each; empty when it passed."""
        found = list(self.errors)
        for job, epochs in self.epochs.items():
            for epoch in range(1, self.config.epochs + 1):
                ids = epochs.get(epoch, [])
                missing = sorted(set(range(self.config.samples)) - set(ids))
                twice = sorted({i for i in ids if ids.count(i) > 1})
                if missing or twice or len(ids) != self.config.samples:
                    found.append(
                        f"{job} job, epoch {epoch}: {len(ids)} samples delivered, missing {missing[:20]}, "
                        f"more than once {twice[:20]}"
                    )
        for name, wait in sorted(self.max_wait.items()):
            if name not in self.exempt and wait > self.config.watchdog_s:
                found.append(f"{name} waited {wait:.1f} s for a batch (watchdog limit {self.config.watchdog_s} s)")
        for name, reports in sorted(self.stall_reports.items()):
            if name not in self.exempt and reports:
                found.append(f"{name} had {len(reports)} watchdog report(s):\n{reports[0]}")
        if self.peak_cache > self.cache_limit:
            found.append(f"the cache held {self.peak_cache} bytes, over its limit of {self.cache_limit}")
        # A late arrival was signed while its key was valid and reached the bucket after the key's end:
        # the stopped process's, which litdata signs again. Only a stop explains one.
        late = [entry for entry in self.refusals if entry[1] == "late arrival"]
        # A revoked key's request is refused, then signed again with keys fetched anew (the samples'
        # accounting above says it was).
        refused = [entry for entry in self.refusals if entry[1] not in ("late arrival", "revoked key")]
        if refused:
            found.append(f"the signing checker refused {len(refused)} request(s), e.g. {refused[:3]}")
        if late and not self.stopped:
            found.append(f"{len(late)} request(s) arrived after their key's end with no process stopped: {late[:3]}")
        if self.config.revoke_every_s and not self.revocations:
            found.append("no key was revoked: the round ended before the first revocation")
        if self.config.optimize_jobs:
            jobs = self.optimize.get("results", {})
            failed = {name: result for name, result in jobs.items() if not result.get("ok")}
            expected = {name: self.config.optimize_samples for name in jobs}
            if len(jobs) != self.config.optimize_jobs or failed:
                found.append(f"optimize jobs failed: {failed or jobs}")
            elif self.optimize.get("samples") != expected:
                found.append(f"the optimize output holds {self.optimize.get('samples')}, not {expected}")
            elif self.config.optimize_jobs > 1 and not self.optimize.get("waited"):
                found.append("no optimize job waited for another: they did not overlap")
        found.extend(f"left behind: {item}" for item in self.leftovers)
        return found

    def summary(self) -> dict[str, Any]:
        """The round in numbers (for the long mode's log)."""
        return {
            "seconds": round(self.seconds, 1),
            "max_wait_s": max(self.max_wait.values(), default=0.0),
            "peak_cache": self.peak_cache,
            "cache_limit": self.cache_limit,
            "faults": self.faults,
            "keys_issued": self.keys_issued,
            "revocations": self.revocations,
            "optimize": {k: v for k, v in self.optimize.items() if k != "results"},
            "late_arrivals": sum(entry[1] == "late arrival" for entry in self.refusals),
            "stopped": self.stopped,
            "killed_worker": self.killed_worker,
            "known_leftovers": len(self.known_leftovers),
            "problems": len(self.problems()),
        }


def key_environment(config: SoakConfig, stack: CredentialStack, home: Path) -> dict[str, str]:
    """The environment variables that give the ranks their S3 keys: the soak's one credential source.

    Every source's keys are checked by ``stack.checker``; an issued key advertises
    ``MIN_TTL + key_ttl_s`` seconds and is refused ``key_ttl_s + key_grace_s`` after issue.

    - ``"static"``: fixed keys in ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (never expire);
    - ``"imds"``: EC2 instance metadata (IMDSv2), which obstore resolves and refreshes itself;
    - ``"credential-process"``: a ``credential_process`` profile printing keys with an
      ``Expiration``, resolved through boto3 (litdata_io's boto3 bridge).

    This is where a reusable expiring-keys gate plugs in: return its environment for the ranks
    (its server must issue through, or accept the keys of, ``stack.authority``, or replace the
    checker in front of moto).
    """
    config_file, credentials_file = home / "config", home / "credentials"
    config_file.write_text("")
    credentials_file.write_text("")
    env = {
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(config_file),
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials_file),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    stack.authority.reset(lifetime=MIN_TTL + config.key_ttl_s, accept_for=config.key_ttl_s + config.key_grace_s)
    if config.keys == "static":
        stack.authority.register_static(*STATIC_KEYS, services=("s3",))
        env.update(AWS_ACCESS_KEY_ID=STATIC_KEYS[0], AWS_SECRET_ACCESS_KEY=STATIC_KEYS[1])
    elif config.keys == "imds":
        del env["AWS_EC2_METADATA_DISABLED"]
        env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = stack.credentials.endpoint
    elif config.keys == "credential-process":
        script = home / "issue_keys.py"
        script.write_text(_PROCESS_SCRIPT.format(url=f"{stack.credentials.endpoint}/container/process/credentials"))
        config_file.write_text(f"[default]\ncredential_process = {sys.executable} {script}\n")
    else:
        raise ValueError(f"unknown key source {config.keys!r}: static, imds or credential-process")
    return env


# The credential_process: fetches a fresh key from the credential stand-in (its container
# endpoint issues through the authority) and prints it the way the AWS CLI's process protocol says.
_PROCESS_SCRIPT = """import json, urllib.request
document = json.load(urllib.request.urlopen({url!r}, timeout=30))
print(json.dumps({{"Version": 1, "AccessKeyId": document["AccessKeyId"],
    "SecretAccessKey": document["SecretAccessKey"], "SessionToken": document["Token"],
    "Expiration": document["Expiration"]}}))
"""


def run_soak(config: SoakConfig, server: S3Server, folder: Path) -> SoakReport:
    """Run one soak round against ``server`` (moto) in ``folder``; what it saw.

    Every process it starts is gone when it returns, whatever happened.
    """
    return _Soak(config, server, folder).run()


class _Soak:
    def __init__(self, config: SoakConfig, server: S3Server, folder: Path) -> None:
        if config.samples % config.chunk_size or config.epochs < 3:
            raise ValueError("samples must be a multiple of chunk_size, and epochs at least 3")
        self.config = config
        self.server = server
        self.folder = folder
        self.cache = folder / "cache"
        self.tmp = folder / "tmp"
        self.pids = folder / "pids"
        self.report = SoakReport(config)
        self.ranks: list[_Rank] = []
        self.sessions: set[int] = set()
        self.seen: dict[int, tuple[int, str]] = {}  # pid: (session, command) of every process of ours
        self.boards: dict[str, int] = {}  # watchdog board: the session of a process that mapped it
        self.killed: set[int] = set()  # sessions whose rank the soak SIGKILLed
        self.lock = threading.Lock()
        self.done = threading.Event()

    # -- the round -------------------------------------------------------------------------------

    def run(self) -> SoakReport:
        started = time.monotonic()
        for path in (self.cache, self.tmp, self.pids, self.folder / "home", self.folder / "out"):
            path.mkdir(parents=True, exist_ok=True)
        url, chunk_bytes, index_bytes = self._dataset()
        cap = index_bytes + self.config.cache_chunks * chunk_bytes
        in_use = self.config.workers * (self.config.env_ranks + self.config.gloo_ranks)
        self.report.cache_limit = cap + in_use * (self.config.max_pre_download + 1) * chunk_bytes
        with start_credential_stack(self.server.endpoint, self.folder / "home") as stack:
            stack.authority.mark = "soak"
            env = self._environment(stack)
            with FaultProxy(stack.checker.endpoint, latency=self.config.latency) as proxy:
                self._script_faults(proxy)
                options = {
                    "endpoint_url": proxy.endpoint,
                    "region_name": "us-east-1",
                    "timeout": self.config.io_timeout,
                    "request_timeout": 60.0,
                    "max_retries": 8,
                    "backoff_base": 0.05,
                    "backoff_max": 1.0,
                }
                shared = {"url": url, "options": options, "cap": cap, "env": env}
                watchers = [threading.Thread(target=self._watch_cache, daemon=True),
                            threading.Thread(target=self._watch_processes, daemon=True)]  # fmt: skip
                for watcher in watchers:
                    watcher.start()
                if self.config.revoke_every_s:
                    watchers.append(threading.Thread(target=self._revoke, args=(stack,), daemon=True))
                    watchers[-1].start()
                try:
                    self._jobs(shared, proxy)
                finally:
                    self._kill_everything()
                    self.done.set()
                    for watcher in watchers:
                        watcher.join(10)
                self.report.faults = _count_faults(proxy)
            issued, verdicts = stack.authority.counts("soak")
            self.report.keys_issued = sum(issued.values())
            self.report.refusals = [entry for entry in stack.authority.refusals if entry[0] == "soak"]
            if self.config.keys != "static" and self.report.keys_issued <= len(self.ranks) and not self.report.errors:
                self.report.errors.append(f"keys were never refreshed: {issued} issued, verdicts {verdicts}")
        self._account()
        self._leftovers()
        self.report.seconds = time.monotonic() - started
        return self.report

    def _dataset(self) -> tuple[str, int, int]:
        import torch

        from litdata_format import BinaryWriter

        local = self.folder / "local"
        writer = BinaryWriter(local, chunk_size=self.config.chunk_size)
        for i in range(self.config.samples):
            writer.add_item(i, {"index": i, "x": torch.full((64,), float(i))})
        writer.done()
        writer.merge()
        bucket = self.server.create_bucket()
        client = self.server.client()
        for path in sorted(local.iterdir()):
            client.put_object(Bucket=bucket, Key=f"data/{path.name}", Body=path.read_bytes())
        chunk_bytes = max(path.stat().st_size for path in local.glob("chunk-*"))
        return f"s3://{bucket}/data", chunk_bytes, (local / "index.json").stat().st_size

    def _environment(self, stack: CredentialStack) -> dict[str, str]:
        home = self.folder / "home"
        env = clean_environment(home)
        env.update(key_environment(self.config, stack, home))
        env.update(
            TMPDIR=str(self.tmp),
            OMP_NUM_THREADS="1",  # 18 processes on a few cores
            LITDATA_ASYNC_MIN_PRE_DOWNLOAD="0",  # keep max_pre_download as given: the cache bound uses it
            PYTHONFAULTHANDLER="1",
        )
        env.update(self.config.extra_env)
        return env

    def _script_faults(self, proxy: FaultProxy) -> None:
        """Faults on chunk GETs, one after another, about ``fault_gap`` GETs apart (seeded)."""
        rng = random.Random(self.config.seed)
        if self.config.stop_downloader:
            # The first stall marks the download the soak stops (it stalls long enough to be caught).
            proxy.inject("stall", method="GET", path_contains="/chunk-", skip=40, stall=self.config.stop_s + 5)
        proxy.inject("503", method="GET", path_contains="index.json")
        chunk_gets = self.config.samples // self.config.chunk_size * 2 * self.config.epochs
        actions = ("reset", "503", "reset_body", "stall", "500", "reset")
        for n in range(max(1, chunk_gets // self.config.fault_gap)):
            gap = rng.randint(self.config.fault_gap // 2, self.config.fault_gap * 3 // 2)
            proxy.inject(actions[n % len(actions)], method="GET", path_contains="/chunk-", skip=gap,
                         stall=self.config.stall_s)  # fmt: skip

    # -- the jobs --------------------------------------------------------------------------------

    def _jobs(self, shared: dict[str, Any], proxy: FaultProxy) -> None:
        threads = [
            threading.Thread(target=self._guarded, args=(self._job, "env", self.config.env_ranks, shared), daemon=True),
            threading.Thread(
                target=self._guarded, args=(self._job, "gloo", self.config.gloo_ranks, shared), daemon=True
            ),
        ]
        if self.config.stop_downloader:
            threads.append(threading.Thread(target=self._guarded, args=(self._stop_downloader, proxy), daemon=True))
        if self.config.optimize_jobs:
            threads.append(threading.Thread(target=self._guarded, args=(self._optimize_jobs, shared), daemon=True))
        for thread in threads:
            thread.start()
        limit = time.monotonic() + 3 * self.config.deadline_s
        for thread in threads:
            thread.join(max(0.0, limit - time.monotonic()))
            if thread.is_alive():
                self._error(f"the soak did not finish within {3 * self.config.deadline_s} s")
                break

    def _guarded(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except Exception as exc:  # the report says what failed; the round goes on to clean up
            self._error(f"{type(exc).__name__}: {exc}")

    def _error(self, text: str) -> None:
        with self.lock:
            self.report.errors.append(text)

    def _job(self, job: str, world: int, shared: dict[str, Any]) -> None:
        first = [self._launch(job, rank, world, 1, shared) for rank in range(world)]
        self._wait_for(lambda: all(_has(r, "checkpoint") or r.proc.poll() is not None for r in first),
                       f"{job} job: every rank at its checkpoint")  # fmt: skip
        failed = [r for r in first if r.proc.poll() is not None]
        if failed:
            raise RuntimeError(f"{failed[0].name} exited before its checkpoint:\n{failed[0].error()}")
        if job == "env" and self.config.kill_worker:
            victim = first[min(1, world - 1)]
            pid = self._worker_pid(victim, 0)
            os.kill(pid, signal.SIGKILL)
            self.report.killed_worker = {"rank": victim.name, "pid": pid}
            for rank in first:
                rank.release.touch()
            self._wait_for(lambda: victim.proc.poll() is not None, f"{victim.name} to fail after its worker's death")
            text = victim.error()
            if victim.proc.returncode == 0 or str(pid) not in text:
                self._error(f"{victim.name} (exit {victim.proc.returncode}) did not report its killed worker "
                            f"(pid {pid}):\n{text}")  # fmt: skip
            for rank in first:  # the launcher tears the job down, as torchrun does
                self._kill(rank)
        else:
            for rank in first:
                rank.release.touch()
            time.sleep(0.5)
            for rank in first:  # a preemption: kill -9 of every rank (their workers are left to notice)
                self._kill(rank)
        self._wait_gone(first)
        second = [self._launch(job, rank, world, 2, shared) for rank in range(world)]
        self._wait_for(lambda: all(r.proc.poll() is not None for r in second), f"{job} job: the resumed run")
        for rank in second:
            if rank.proc.returncode != 0 or not _has(rank, "done"):
                raise RuntimeError(f"{rank.name} failed (exit {rank.proc.returncode}):\n{rank.error()}")
        self._wait_gone(second)

    def _launch(self, job: str, rank: int, world: int, run: int, shared: dict[str, Any]) -> _Rank:
        out = self.folder / "out"
        name = f"{job}-r{rank}-run{run}"
        spec = {
            "name": name,
            "url": shared["url"],
            "cache": str(self.cache),
            "storage_options": shared["options"],
            "max_cache_size": shared["cap"],
            "max_pre_download": self.config.max_pre_download,
            "batch_size": self.config.batch_size,
            "workers": self.config.workers,
            # forkserver under gloo: on CPython 3.11 a fork while a gloo thread holds the
            # interpreter's thread-state lock can hang (see tests/scripts/ddp_matrix_rank.py)
            "context": "forkserver" if job == "gloo" else None,
            "watchdog_s": self.config.watchdog_s,
            "epochs": self.config.epochs,
            "step_s": self.config.step_s,
            "gloo": job == "gloo",
            "events": str(out / f"{name}.jsonl"),
            "pids": str(self.pids),
            "checkpoint": [2, self.config.checkpoint_batch] if run == 1 else None,
            "save": str(out / f"{job}-r{rank}.state"),
            "load": str(out / f"{job}-r{rank}.state") if run == 2 else None,
            "release": str(out / f"{name}.release"),
            "deadline_s": self.config.deadline_s,
        }
        spec_path = out / f"{name}.json"
        spec_path.write_text(json.dumps(spec))
        env = dict(shared["env"])
        if job == "gloo":
            port = shared.setdefault(f"gloo-port-{run}", str(free_port()))  # one rendezvous per run
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                       WORLD_SIZE=str(world), LOCAL_RANK=str(rank))  # fmt: skip
        elif self.config.rank_variable == "GLOBAL_RANK":
            env.update(GLOBAL_RANK=str(rank), WORLD_SIZE=str(world), NNODES="1")
        else:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
        # Each rank's own TMPDIR (under the soak's), kept by its resumed run as a job restarted on
        # the same node would: what is left in it is that rank's sessions'.
        env["TMPDIR"] = str(self.tmp / f"{job}-r{rank}")
        (self.tmp / f"{job}-r{rank}").mkdir(exist_ok=True)
        stderr = out / f"{name}.stderr"
        # forked from tests/support/zygote.py (torch imported once), as `python soak_rank.py spec` would run
        proc = start_python(
            [str(RANK_SCRIPT), str(spec_path)],
            env=env,
            cwd=ROOT,
            output=stderr,
            start_new_session=True,  # its session holds every process it starts: none may outlive it
        )
        entry = _Rank(job, rank, run, proc, Path(spec["events"]), stderr, Path(spec["release"]))
        with self.lock:
            self.ranks.append(entry)
            self.sessions.add(proc.pid)
        return entry

    def _kill(self, rank: _Rank) -> None:
        if rank.proc.poll() is None:
            _signal(rank.proc.pid, signal.SIGKILL)
            with self.lock:
                self.killed.add(rank.proc.pid)

    def _worker_pid(self, rank: _Rank, worker: int) -> int:
        path = self.pids / f"{rank.name}-w{worker}.pid"
        self._wait_for(path.exists, f"{rank.name}'s worker {worker} to say its pid")
        return int(path.read_text())

    def _wait_for(self, condition: Any, what: str) -> None:
        limit = time.monotonic() + self.config.deadline_s
        while not condition():
            if time.monotonic() > limit:
                raise TimeoutError(f"waited {self.config.deadline_s} s for {what}; " + self._where())
            time.sleep(0.05)

    def _where(self) -> str:
        with self.lock:
            ranks = list(self.ranks)
        lines = []
        for rank in ranks:
            state = "running" if rank.proc.poll() is None else f"exit {rank.proc.returncode}"
            last = next((r for r in reversed(rank.records()) if "e" in r), None)
            where = f"epoch {last['e']} batch {last['b']}" if last else "no batch yet"
            lines.append(f"{rank.name}: {state}, {where}\n{rank.error()[-1500:]}")
        return "ranks:\n" + "\n".join(lines)

    def _wait_gone(self, ranks: list[_Rank]) -> None:
        """Every process of these ranks' sessions exits (within 30 s of the ranks themselves)."""
        for rank in ranks:
            try:
                rank.proc.wait(self.config.deadline_s)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"{rank.name} did not exit within {self.config.deadline_s} s") from None
        sessions = {rank.proc.pid for rank in ranks}
        limit = time.monotonic() + 30
        while (alive := _session_processes(sessions)) and time.monotonic() < limit:
            time.sleep(0.2)
        if alive:
            described = "\n".join(f"  {pid}: {_describe(pid)}" for pid in alive)
            self._error(f"processes outlived their rank by 30 s:\n{described}")
            for pid in alive:
                _signal(pid, signal.SIGCONT)
                _signal(pid, signal.SIGKILL)

    # -- revoked keys and concurrent optimize jobs ----------------------------------------------

    def _revoke(self, stack: CredentialStack) -> None:
        """Revoke every key issued so far, every ``revoke_every_s`` seconds, until the round ends."""
        while not self.done.wait(self.config.revoke_every_s):
            if stack.authority.revoke():
                with self.lock:
                    self.report.revocations += 1

    def _optimize_jobs(self, shared: dict[str, Any]) -> None:
        """``optimize_jobs`` jobs at once into one bucket output (``mode="append"``); the output must hold them all."""
        url = shared["url"].rsplit("/", 1)[0] + "/optimized"
        tmp = self.folder / "optimize-tmp"
        tmp.mkdir(exist_ok=True)
        env = {**shared["env"], "TMPDIR": str(tmp)}
        procs = {}
        for n in range(self.config.optimize_jobs):
            name = f"job{n}"
            spec = {"output": url, "job": name, "mode": "append", "n": self.config.optimize_samples,
                    "storage_options": shared["options"], "delay": 0.01}  # fmt: skip
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.scripts.concurrent_optimize", json.dumps(spec)],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True,
            )  # fmt: skip
        results, waited = {}, []
        for name, proc in procs.items():
            try:
                out, err = proc.communicate(timeout=self.config.deadline_s)
            except subprocess.TimeoutExpired:
                _signal(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            lines = out.strip().splitlines()
            results[name] = json.loads(lines[-1]) if lines else {"ok": False, "error": err[-2000:]}
            if "is being written by job" in err:
                waited.append(name)
        from collections import Counter

        from litdata_stream import StreamingDataset

        dataset = StreamingDataset(url, storage_options=self.server.storage_options(),
                                   cache_dir=str(self.folder / "optimize-read"))  # fmt: skip
        samples = dict(Counter(str(dataset[i]["job"]) for i in range(len(dataset))))
        with self.lock:
            self.report.optimize = {"results": results, "samples": samples, "waited": waited}

    # -- the stopped downloader ------------------------------------------------------------------

    def _stop_downloader(self, proxy: FaultProxy) -> None:
        """SIGSTOP the process downloading the first stalled chunk, for ``stop_s``; then SIGCONT it."""
        stalled: list[str] = []

        def first_stall() -> bool:
            stalled[:] = [path for _, path, action in proxy.requests("GET", "/chunk-") if action == "stall"][:1]
            return bool(stalled)

        self._wait_for(first_stall, "the download to stop (the first stalled chunk GET)")
        chunk = stalled[0].split("?")[0].rsplit("/", 1)[1]
        holder: list[tuple[int, int]] = []

        def find_holder() -> bool:
            for lock in self.cache.rglob(f".{chunk}.lock"):
                with contextlib.suppress(FileNotFoundError):
                    inode = lock.stat().st_ino
                    holders = [pid for pid, waiting in _flocks(inode) if not waiting]
                    if holders:
                        holder[:] = [(holders[0], inode)]
                        return True
            return False

        self._wait_for(find_holder, f"the process holding {chunk}'s download lock")
        pid, inode = holder[0]
        session = _session_of(pid)
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        with self.lock:
            owners = [r.name for r in self.ranks if r.proc.pid == session]
            self.report.exempt.update(owners)
        waiters: set[int] = set()
        blocked: dict[str, set[int]] = {}  # lock file the stopped process holds: who waited for it
        waited: set[int] = set()  # inodes of the lock files it holds that someone waited on
        since: dict[int, float] = {}  # waiter: when it was first seen waiting (while it still waits)
        first_wait: float | None = None
        last_release: float | None = None
        # Stopped for stop_s, and longer while another process has waited on one of its locks for
        # less than the watchdog's limit and a margin: a waiter that is never released (nobody
        # takes the download over) then certainly stalls its rank past the limit.
        while True:
            now = time.monotonic()
            waiters.update(p for p, waiting in _flocks(inode) if waiting)
            locks = _all_flocks()
            held = {ino for ino, (holder, waiting) in locks if holder == pid and not waiting}
            waiting_now = {other for ino, (other, waiting) in locks if waiting and ino in held}
            for ino, (other, waiting) in locks:
                if waiting and ino in held:
                    blocked.setdefault(_cache_file(self.cache, ino), set()).add(other)
                    waited.add(ino)
            if waiting_now and first_wait is None:
                first_wait = now - stopped_at
            if set(since) - waiting_now:
                last_release = now - stopped_at
            since = {other: since.get(other, now) for other in waiting_now}
            longest = now - min(since.values(), default=now)
            if now - stopped_at >= self.config.stop_s and not 0 < longest < self.config.watchdog_s + 15:
                break
            least = self.config.stop_min_s
            if least is not None and now - stopped_at >= least and waited:
                # Every wait ended, or every lock someone waited on was taken over (renamed
                # .taken-*): its waiters then moved on to the taker's lock within a second, though
                # an abandoned flock stays listed in /proc/locks until the lock comes.
                taken = all(".taken-" in _cache_file(self.cache, ino) for ino in waited)
                if not waiting_now or (taken and now - stopped_at >= least + 1):
                    break
            if now - stopped_at > self.config.deadline_s:
                break
            time.sleep(0.1)
        _signal(pid, signal.SIGCONT)
        self.report.stopped = {"chunk": chunk, "pid": pid, "rank": owners, "waiters": sorted(waiters),
                               "blocked_on_its_locks": {k: sorted(v) for k, v in blocked.items()},
                               "seconds": round(time.monotonic() - stopped_at, 1),
                               # seconds into the stop: the first waiter seen, the last wait seen to end
                               "first_wait_s": first_wait and round(first_wait, 1),
                               "last_release_s": last_release and round(last_release, 1)}  # fmt: skip

    # -- watching --------------------------------------------------------------------------------

    def _watch_cache(self) -> None:
        while not self.done.wait(0.02):
            total = 0
            for folder, _, names in os.walk(self.cache):
                for name in names:
                    with contextlib.suppress(FileNotFoundError):
                        total += os.stat(os.path.join(folder, name)).st_size
            self.report.peak_cache = max(self.report.peak_cache, total)

    def _watch_processes(self) -> None:
        tick = 0
        while not self.done.wait(0.25):
            tick += 1
            with self.lock:
                sessions = set(self.sessions)
            for pid in _session_processes(sessions):
                session = _session_of(pid)
                if pid not in self.seen and session is not None:  # None: it exited meanwhile
                    self.seen[pid] = (session, _command(pid))
                if tick % 4 == 0 and pid in self.seen:
                    with contextlib.suppress(OSError):
                        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                            if "litdata-activity-" in line:
                                self.boards.setdefault(line.split()[-1], self.seen[pid][0])

    def _kill_everything(self) -> None:
        with self.lock:
            sessions = set(self.sessions)
        for pid in _session_processes(sessions):
            _signal(pid, signal.SIGCONT)
            _signal(pid, signal.SIGKILL)
        for rank in self.ranks:
            with contextlib.suppress(subprocess.TimeoutExpired):
                rank.proc.wait(10)

    # -- verdicts --------------------------------------------------------------------------------

    def _account(self) -> None:
        for job in ("env", "gloo"):
            epochs: dict[int, list[int]] = {}
            for rank in (r for r in self.ranks if r.job == job):
                records = rank.records()
                cut = next((r["checkpoint"] for r in records if "checkpoint" in r), None)
                waits = [r["wait"] for r in records if "e" in r]
                self.report.max_wait[rank.name] = max(waits, default=0.0)
                self.report.stall_reports[rank.name] = [r["stall_warning"] for r in records if "stall_warning" in r]
                for record in records:
                    if "e" not in record:
                        continue
                    if rank.run == 1 and cut is not None and [record["e"], record["b"]] > cut:
                        continue  # delivered after the checkpoint: the resumed run delivers it again
                    epochs.setdefault(record["e"], []).extend(record["ids"])
            self.report.epochs[job] = epochs

    def _leftovers(self) -> None:
        for path in sorted(self.cache.rglob("*")):
            name = path.name
            if path.is_dir() and (name.startswith("v-") or path.parent == self.cache):
                continue  # a version folder, a dataset's folder
            if name in _ALLOWED_CACHE_FILES or (name.startswith("chunk-") and name.endswith(".bin")):
                continue
            self.report.leftovers.append(f"{path.relative_to(self.folder)} in the cache")
        # Known, in the TMPDIR of a torn-down rank (SIGKILLed, or the one whose worker was
        # SIGKILLed and which then failed): CPython multiprocessing's pymp-* folders (the socket of
        # a listener: its forkserver's, or the resource sharer a DataLoader worker opens to pass
        # tensors), which only a clean exit of their process removes; a torn-down rank's workers go
        # with it. litdata's files of a torn-down run (its dataset's epoch record here, its
        # loader's watchdog board in /dev/shm) are swept by the resumed run. Anything else is a leak.
        victim = self.report.killed_worker.get("rank")
        torn = {f"{r.job}-r{r.rank}" for r in self.ranks if r.proc.pid in self.killed or r.name == victim}
        for path in sorted(self.tmp.iterdir()):
            if not path.is_dir() or path.name not in {f"{r.job}-r{r.rank}" for r in self.ranks}:
                self.report.leftovers.append(f"{path.relative_to(self.folder)} in the ranks' TMPDIR")
                continue
            for item in sorted(path.iterdir()):
                where = f"{item.relative_to(self.folder)} in {path.name}'s TMPDIR"
                if self.config.allow_killed_leftovers and path.name in torn and item.name.startswith("pymp-"):
                    self.report.known_leftovers.append(f"{where} (a torn-down rank)")
                else:
                    self.report.leftovers.append(where)
        for board, session in sorted(self.boards.items()):
            if os.path.exists(board):
                killed = " of a SIGKILLed rank" if session in self.killed else ""
                self.report.leftovers.append(f"{board} (a loader's watchdog board{killed})")
        for pid in _session_processes({session for session, _ in self.seen.values()} | self.sessions):
            self.report.leftovers.append(f"process {pid}: {_describe(pid)}")


def _has(rank: _Rank, key: str) -> bool:
    return any(key in record for record in rank.records())


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, session, ...


def _session_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[3]) if fields and fields[0] != "Z" else None


def _session_processes(sessions: set[int]) -> list[int]:
    """Live (not zombie) processes in these sessions."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _session_of(int(entry.name)) in sessions:
            found.append(int(entry.name))
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _describe(pid: int) -> str:
    """A process's command line and where each of its threads waits in the kernel."""
    waits = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                comm = Path(task.path, "comm").read_text().strip()
                waits.append(f"{comm}:{Path(task.path, 'wchan').read_text().strip()}")
    return f"{_command(pid)} [{', '.join(waits)}]"


def _flocks(inode: int) -> Iterator[tuple[int, bool]]:
    """(pid, waiting) of every flock on files with this inode, holders and waiters."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            waiting = len(fields) > 1 and fields[1] == "->"
            if waiting:
                fields = fields[:1] + fields[2:]
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                yield int(fields[4]), waiting


def _all_flocks() -> list[tuple[int, tuple[int, bool]]]:
    """(inode, (pid, waiting)) of every flock on the machine."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            waiting = len(fields) > 1 and fields[1] == "->"
            if waiting:
                fields = fields[:1] + fields[2:]
            if len(fields) >= 6 and fields[1] == "FLOCK":
                found.append((int(fields[5].rsplit(":", 1)[-1]), (int(fields[4]), waiting)))
    return found


def _cache_file(cache: Path, inode: int) -> str:
    """The name of the file under ``cache`` with this inode (or the inode)."""
    for folder, _, names in os.walk(cache):
        for name in names:
            with contextlib.suppress(OSError):
                if os.stat(os.path.join(folder, name)).st_ino == inode:
                    return name
    return f"inode {inode}"


def _count_faults(proxy: FaultProxy) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, _, action in proxy.requests():
        counts[action] = counts.get(action, 0) + 1
    return counts

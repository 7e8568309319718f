"""Orchestrate one probe launch: config file -> launcher commands -> ranks -> merged records.

``LaunchOptions`` (the checked launch) lives with the launcher registry, ``exec/launchers.py``.

The CLI calls ``prepare()`` (pure: builds the config and the launch plan, enough for
``--dry-run``) and then ``execute()`` (runs it and reads the ranks' records back).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.bench.probes.live import Tail
from gpufabric.bench.probes.results import RankLog, diagnose, read_ranks
from gpufabric.errors import InputError
from gpufabric.exec import launch, launchers
from gpufabric.exec.launchers import Job, LaunchOptions

MODULES = {
    "collectives": "gpufabric.bench.probes.collectives",
    "train": "gpufabric.bench.probes.train",
    "checkpoint": "gpufabric.bench.probes.checkpoint",
    "gpu": "gpufabric.bench.probes.gpu",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    kind: str
    out_dir: Path
    config_path: Path
    config: dict[str, Any]
    plan: launch.LaunchPlan
    owns_dir: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Executed:
    prepared: Prepared
    logs: dict[int, RankLog]
    outcome: launch.Outcome | None  # None: interrupted before the launcher returned
    error: str  # '' when every rank finished
    interrupted: KeyboardInterrupt | None = None  # Ctrl-C or SIGTERM (errors.Terminated) stopped it

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts the ranks ran on, in rank order, each once (unknown ranks left out)."""
        seen = dict.fromkeys(log.host for _, log in sorted(self.logs.items()) if log.host != "?")
        return tuple(seen)

    def rank_map(self) -> list[dict[str, Any]]:
        """rank -> host -> device, for the fingerprint's ``run`` section."""
        out = []
        for rank, log in sorted(self.logs.items()):
            ready = log.of("ready")
            start = log.of("start")
            out.append(
                {
                    "rank": rank,
                    "host": log.host,
                    "device": ready[0].get("device") if ready else None,
                    "local_rank": start[0].get("local_rank") if start else None,
                }
            )
        return out


def prepare(kind: str, probe_config: dict[str, Any], opts: LaunchOptions, *, write: bool = True) -> Prepared:
    """Write the rank config and build the launch plan (nothing runs yet).

    ``write`` False (``--dry-run``) builds the same plan and writes nothing into a
    ``--run-dir`` the user gave (a temporary directory of our own is still made and is
    removed by ``cleanup``).
    """
    if opts.runner.follows_job:
        return _prepare_followed(kind, probe_config, opts)
    owns = not opts.work_dir
    if owns and launchers.spans_machines(opts.launcher, opts.nodes, opts.hosts, hostfile=opts.site.hostfile):
        raise InputError(
            f"--launcher {opts.launcher} on {opts.nodes} nodes: pass --run-dir DIR on storage"
            " every node mounts (the ranks read their config and write records there)"
        )
    out_dir = Path(tempfile.mkdtemp(prefix=f"gpufabric-{kind}-")) if owns else Path(opts.work_dir)
    write = write or owns
    if write:
        out_dir.mkdir(parents=True, exist_ok=True)
    config = {
        **probe_config,
        "out_dir": str(out_dir),
        "backend": opts.backend,
        "init_timeout_s": opts.init_timeout_s,
        "op_timeout_s": opts.op_timeout_s,
    }
    config_path = out_dir / "config.json"
    try:
        if write:
            config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
        plan = opts.runner.build(
            Job(
                module=MODULES[kind],
                args=(str(config_path),),
                nodes=opts.nodes,
                nproc=opts.nproc,
                hosts=opts.hosts,
                master_port=opts.master_port,
                env=opts.env,
                job_name=f"gpufabric-{kind}",
                out_dir=str(out_dir),
                time_limit_min=max(1, int(opts.timeout_s // 60) + 1),
                slurm_mode=opts.slurm_mode,
                gpus_per_node=opts.nproc if opts.backend == "nccl" else 0,
                control_ifname=opts.control_ifname,
                data_ifname=opts.data_ifname,
                site=opts.site,
            )
        )
    except BaseException:
        if owns:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return Prepared(kind=kind, out_dir=out_dir, config_path=config_path, config=config, plan=plan, owns_dir=owns)


def _prepare_followed(kind: str, probe_config: dict[str, Any], opts: LaunchOptions) -> Prepared:
    """A followed job (k8s) carries the config; ranks write records where they run (``--run-dir`` there)."""
    out_dir = Path(tempfile.mkdtemp(prefix=f"gpufabric-{kind}-"))
    config = {
        **probe_config,
        "out_dir": opts.work_dir or "/tmp/gpufabric-run",
        "backend": opts.backend,
        "init_timeout_s": opts.init_timeout_s,
        "op_timeout_s": opts.op_timeout_s,
    }
    try:
        plan = opts.runner.build(
            Job(
                kind=kind,
                module=MODULES[kind],
                config=config,
                out_dir=str(out_dir),
                nodes=opts.nodes,
                nproc=opts.nproc,
                backend=opts.backend,
                k8s_image=opts.k8s_image,
                k8s_namespace=opts.k8s_namespace,
                k8s_rdma=opts.k8s_rdma,
                env=opts.env,
                control_ifname=opts.control_ifname,
                data_ifname=opts.data_ifname,
                site=opts.site,
            )
        )
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return Prepared(
        kind=kind, out_dir=out_dir, config_path=Path(plan.script_path), config=config, plan=plan, owns_dir=True
    )


def execute(prep: Prepared, opts: LaunchOptions, on_record: Callable[[dict[str, Any]], None] | None = None) -> Executed:
    """Run the plan; ranks that never wrote a 'done' record make ``error`` name the culprit.

    ``on_record`` sees rank 0's records as they are written (``live.Tail``), from a thread.
    Ctrl-C or SIGTERM (KeyboardInterrupt, ``errors.Terminated``) while the ranks run is
    returned as ``interrupted``, not raised: ``launch.execute`` has killed every rank's
    process group by then, and the records the ranks wrote (every finished size or step)
    are read back so that the caller stores them before it ends the run.
    """
    # One thread per rank keeps a 2-core machine from oversubscribing itself with intra-op pools.
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **opts.env}
    launchers.check_run_dir(prep.plan, prep.out_dir, timeout_s=min(60.0, opts.timeout_s), env=env)
    tail = Tail(prep.out_dir / "rank0.jsonl", on_record) if on_record is not None else nullcontext()
    try:
        with tail:
            outcome = launch.execute(
                prep.plan,
                timeout_s=opts.timeout_s,
                log_dir=prep.out_dir,
                env=env,
                peer_grace_s=min(launch.PEER_FAILURE_GRACE_S, opts.op_timeout_s + 2),
            )
    except KeyboardInterrupt as exc:
        logs = read_ranks(prep.out_dir, prep.plan.num_ranks)
        return Executed(prepared=prep, logs=logs, outcome=None, error="", interrupted=exc)
    logs = read_ranks(prep.out_dir, prep.plan.num_ranks)
    error = diagnose(logs)
    if outcome.timed_out:
        error = f"launch timed out after {opts.timeout_s:g} s and was killed" + (f"; {error}" if error else "")
    elif not error and any(code not in (0, None) for code in outcome.returncodes):
        error = f"launcher exited {outcome.returncodes}: {_last_line(outcome)}"
    elif error and not any(log.records for log in logs.values()):
        error += f" (launcher output: {_last_line(outcome)})"
    return Executed(prepared=prep, logs=logs, outcome=outcome, error=error)


def _last_line(outcome: launch.Outcome) -> str:
    """The last line the first talkative launcher command printed (at most 300 characters)."""
    return next((log.strip().splitlines()[-1] for log in outcome.logs if log.strip()), "")[:300]


def cleanup(prep: Prepared) -> None:
    if prep.owns_dir:
        shutil.rmtree(prep.out_dir, ignore_errors=True)

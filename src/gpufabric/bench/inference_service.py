"""``gpufabric bench inference`` as a library call: a typed request in, a typed report out.

One recorded run holds up to three parts (docs/inference.md, "Benchmarks"):

- **kv**: the plan's KV-cache messages over torch send/recv (``bench.probes.inference``),
  judged against the fabric model of the design ``gpufabric plan`` recommends;
- **weight load** (``directory``): a scaled-down safetensors write + cold read;
- **load** (``url``): a serving endpoint driven by ``bench.loadgen``: ``concurrency``
  clients in a closed loop (``vllm bench serve --max-concurrency``, AIPerf/genai-perf
  concurrency mode) or the spec's Poisson rate; TTFT, TPOT, ITL p50/p99 and output
  tokens/s are stored as one ``serving.load`` result and judged against the spec's SLOs.

``prepare`` does every check before a run is opened (a usage error stores no run);
``run`` executes; ``dry_run`` says what would run. The design lookup is injected
(``recommend``): the planner sits beside this package, not below it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric.bench import loadgen
from gpufabric.bench.probes import run as probe_run
from gpufabric.bench.probes import service
from gpufabric.bench.probes.inference import Design, InferenceOutcome, KvProbeSize, kv_probe_sizes, kv_slos
from gpufabric.errors import InputError
from gpufabric.model import inference as m
from gpufabric.results.records import Direction, Metric, Outcome, Slo, Status, TestResult, Verdict

__all__ = [
    "InferenceBenchRequest",
    "InferenceReport",
    "PreparedInference",
    "dry_run",
    "dry_run_lines",
    "prepare",
    "run",
]

#: Name of the stored load result; the spec's SLOs match it by this test name.
LOAD_TEST = "serving.load"
#: Summary keys stored as metrics: (key, unit, direction).
LOAD_METRICS = (
    ("ttft_p50_s", "s", Direction.lower),
    ("ttft_p99_s", "s", Direction.lower),
    ("tpot_p50_s", "s", Direction.lower),
    ("tpot_p99_s", "s", Direction.lower),
    ("itl_p50_s", "s", Direction.lower),
    ("itl_p99_s", "s", Direction.lower),
    ("output_tokens_per_s", "tokens/s", Direction.higher),
    ("request_throughput_rps", "1/s", Direction.higher),
)

#: (spec, catalog) -> the design ``gpufabric plan`` recommends, or None when none meets the SLOs.
Recommend = Callable[[Any, Any], Design | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceBenchRequest:
    """What the command line asked for (launch options already built by the CLI)."""

    spec_file: Path
    opts: probe_run.LaunchOptions
    load_opts: probe_run.LaunchOptions | None = None  # weight-load launch, with ``directory``
    fabric: str = ""  # judge the KV part against this fabric with the spec's tp (else the plan's design)
    directory: Path | None = None
    scale: int = 1000
    iters: int = 20
    warmup: int = 3
    thresholds: Path | None = None
    kv: bool = True
    url: str = ""  # serving endpoint for the load part (empty: no load part)
    served_model: str = ""  # the endpoint's model name (default: the spec's name)
    concurrency: int | None = None  # closed loop of N clients (default: the spec's traffic)
    requests: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedInference:
    """Everything checked and derived before the run opens."""

    name: str
    design: Design | None
    sizes: tuple[KvProbeSize, ...]
    kv_config: dict[str, Any] | None
    opts: probe_run.LaunchOptions
    load_config: dict[str, Any] | None
    load_opts: probe_run.LaunchOptions | None
    weight_bytes: float
    scale: int
    judging: service.Judging
    load: loadgen.LoadSpec | None
    url: str
    served_model: str
    load_slos: tuple[Slo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceReport:
    """A finished ``bench inference`` run: the probe outcome plus what the CLI prints."""

    prepared: PreparedInference
    outcome: InferenceOutcome
    load_summary: dict[str, Any] | None = None
    load_verdicts: tuple[Verdict, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    def to_dict(self) -> dict[str, Any]:
        p, o = self.prepared, self.outcome
        return {
            "kind": "inference",
            "name": p.name,
            "run_id": o.run_id,
            "fabric": p.design.fabric if p.design else None,
            "design": p.design.source if p.design else None,
            "tp": p.design.tp if p.design else None,
            "kv_sizes": [
                {
                    "label": s.label,
                    "prompt_tokens": s.prompt_tokens,
                    "size_bytes": s.size_bytes,
                    "model_time_us": s.model_time_us,
                }
                for s in p.sizes
            ],
            "kv_run": o.kv.to_dict() if p.kv_config is not None else None,
            "kv_verdicts": [_verdict_dict(v) for v in o.kv_verdicts],
            "weight_load_run": None
            if not o.loaded
            else {"run_id": o.run_id, "results": [r.to_dict() for r in o.load_rows]},
            "weight_bytes": p.weight_bytes,
            "weight_scale": p.scale,
            "load": None
            if p.load is None
            else {"url": p.url, "model": p.served_model, **_load_dict(p.load), "summary": self.load_summary},
            "load_verdicts": [_verdict_dict(v) for v in self.load_verdicts],
            "status": o.status.value,
            "failures": list(o.failures),
            "warnings": list(o.warnings),
            "error": o.error or None,
        }

    def lines(self) -> list[str]:
        """The text report, one line each."""
        p, o = self.prepared, self.outcome
        where = f", KV over {p.design.fabric} model ({p.design.source})" if p.design else ""
        out = [f"bench inference: {p.name}{where}, run {o.run_id} ({o.status.value})"]
        words = {"passed": "PASS", "not_planned_hardware": "NOT PLANNED"}
        for v in o.kv_verdicts:
            out.append(f"{words.get(v.outcome.value, 'FAIL')} {v.test}: {v.reason}")
        for v in self.load_verdicts:
            out.append(f"{words.get(v.outcome.value, 'FAIL')} {v.test} {v.metric}: {v.reason}")
        for row in o.load_rows:
            full_s = p.weight_bytes / (row.read_gbps * 1e9) if row.read_gbps else float("nan")
            out.append(
                f"weight load: {row.size_bytes} B safetensors read at {row.read_gbps:.3g} GB/s"
                f" (run {o.run_id}); the full {p.weight_bytes / 1e9:.0f} GB at this rate: {full_s:.3g} s"
            )
        if self.load_summary is not None and p.load is not None:
            s = self.load_summary
            out.append(
                f"load: {_load_words(p.load)}: TTFT p50/p99 {s['ttft_p50_s'] * 1e3:.1f}/{s['ttft_p99_s'] * 1e3:.1f} ms,"
                f" TPOT p50/p99 {s['tpot_p50_s'] * 1e3:.2f}/{s['tpot_p99_s'] * 1e3:.2f} ms,"
                f" ITL p50/p99 {s['itl_p50_s'] * 1e3:.2f}/{s['itl_p99_s'] * 1e3:.2f} ms,"
                f" {s['output_tokens_per_s']:.1f} output tokens/s, {s['failed']} of {s['requests']} failed"
            )
        judged = {f"{v.reason} ({v.test})" for v in (*o.kv_verdicts, *self.load_verdicts)}
        out += [f"FAIL {line}" for line in o.failures if line not in judged]
        if o.error:
            out.append(f"error: {o.error}")
        return out


def _verdict_dict(v: Verdict) -> dict[str, Any]:
    return {
        "test": v.test,
        "outcome": v.outcome.value,
        "measured": v.measured,
        "expected": v.expected,
        "reason": v.reason,
    }


def _load_dict(load: loadgen.LoadSpec) -> dict[str, Any]:
    return {
        "concurrency": load.concurrency,
        "rate_rps": load.rate_rps,
        "requests": load.requests,
        "prompt_tokens": load.prompt_tokens,
        "output_tokens": load.output_tokens,
    }


def _load_words(load: loadgen.LoadSpec) -> str:
    shape = (
        f"closed loop of {load.concurrency} clients" if load.concurrency else f"Poisson {load.rate_rps:g} requests/s"
    )
    return f"{shape}, {load.requests} requests of {load.prompt_tokens} in / {load.output_tokens} out"


def _design(spec: Any, catalog: Any, fabric: str, recommend: Recommend) -> Design:
    """The design to judge against: ``fabric`` with the spec's TP, else the plan's recommendation."""
    if fabric:
        catalog.fabric(fabric)  # unknown id -> CatalogError (exit 2) before anything runs
        tp = spec.workload.replica.tp
        if not isinstance(tp, int):
            raise InputError("bench inference --fabric needs workload.replica.tp as a number (or omit --fabric)")
        return Design(fabric=fabric, tp=tp, source=f"--fabric {fabric}")
    best = recommend(spec, catalog)
    if best is None:
        raise InputError(
            f"{spec.name}: `gpufabric plan` recommends no serving design (none meets the SLOs);"
            " pass --fabric to judge against one anyway"
        )
    return best


def _load_slos(spec: Any) -> tuple[Slo, ...]:
    """The spec's latency objectives on the measured load (judged as they are: they are the service's)."""
    slo = spec.workload.slo
    keys = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p99_s")
    return tuple(
        Slo(test=LOAD_TEST, metric=k, direction=Direction.lower, maximum=float(v), source=f"spec {spec.name}: slo.{k}")
        for k in keys
        if (v := getattr(slo, k)) is not None
    )


def prepare(req: InferenceBenchRequest, *, recommend: Recommend) -> PreparedInference:
    """Load the spec, find the design, derive the parts' configs; every usage error raises here.

    Raises:
        InputError: nothing to run, a bad spec, option or URL, or no design to judge against.
    """
    from gpufabric.bench.probes.shapes import CheckpointShape
    from gpufabric.bench.slo import load_thresholds
    from gpufabric.catalog import load_catalog
    from gpufabric.spec.inference import load_inference_spec, read_located

    if not req.kv and req.directory is None and not req.url:
        raise InputError("bench inference --no-kv needs --dir or --url: nothing would run")
    if not req.url and (req.concurrency is not None or req.requests is not None or req.served_model):
        raise InputError("--concurrency, --requests and --served-model drive a serving endpoint: add --url")
    catalog = load_catalog([])
    spec = load_inference_spec(read_located(req.spec_file), known_ids=catalog.known_ids())
    design = _design(spec, catalog, req.fabric, recommend) if req.kv else None
    sizes = kv_probe_sizes(spec, catalog, fabric=design.fabric, tp=design.tp) if design else []
    kv_config = None
    if design is not None:
        kv_config = {
            "ops": ["send_recv"],
            "sizes": [s.size_bytes for s in sizes],
            "dtypes": ["bfloat16"],
            "iters": req.iters,
            "warmup": req.warmup,
            "corrupt_rank": None,
            "die_rank": None,
            "die_after": 0,
        }
    weight_bytes = m.shape_from_spec(spec.workload.model).weight_bytes
    load_config = None
    if req.directory is not None:
        # Weights only (no optimizer state): one file of per-layer tensors, like a safetensors shard.
        shape = CheckpointShape(
            total_bytes=max(1 << 20, int(weight_bytes // req.scale)),
            layers=min(spec.workload.model.layers, 32),
            tensors_per_layer=4,
            hidden=max(64, spec.workload.model.hidden // 16),
        )
        load_config = {
            **shape.as_config(),
            "directory": str(req.directory.resolve()),
            "keep": False,
            "formats": ["safetensors"],
        }
    load = None
    if req.url:
        loadgen.openai_stream(req.url, "-")  # a bad URL is one line before anything runs
        load = loadgen.load_for(spec, requests=req.requests, concurrency=req.concurrency)
    slos = tuple(load_thresholds(req.thresholds)) if req.thresholds is not None else ()
    planned = None
    if design is not None:
        from gpufabric.bench.planned import for_design

        planned = for_design(
            design.fabric, gpu=spec.cluster.gpu, gpus_per_node=spec.cluster.gpus_per_node, catalog=catalog
        )
    return PreparedInference(
        name=spec.name,
        design=design,
        sizes=tuple(sizes),
        kv_config=kv_config,
        opts=req.opts,
        load_config=load_config,
        load_opts=req.load_opts if load_config is not None else None,
        weight_bytes=weight_bytes,
        scale=req.scale,
        judging=service.Judging(slos=slos, planned=planned),
        load=load,
        url=req.url,
        served_model=req.served_model or spec.name,
        load_slos=_load_slos(spec) if load is not None else (),
    )


def dry_run(p: PreparedInference) -> dict[str, Any]:
    """What a run would do: the KV launch's commands and config, the SLOs, the load; nothing runs."""
    doc: dict[str, Any] = {"dry_run": True, "launcher": p.opts.launcher, "commands": [], "sbatch_script": None}
    if p.kv_config is not None:
        prep = probe_run.prepare("collectives", p.kv_config, p.opts, write=False)  # nothing lands in --run-dir
        try:
            doc.update(
                commands=[c.shell() for c in prep.plan.commands], sbatch_script=prep.plan.script, config=prep.config
            )
        finally:
            probe_run.cleanup(prep)
    kv = kv_slos(p.sizes, p.design) if p.design is not None else []
    doc["slos"] = [*p.judging.slos, *kv, *p.load_slos]
    doc["load"] = None if p.load is None else {"url": p.url, "model": p.served_model, **_load_dict(p.load)}
    doc["load_words"] = None if p.load is None else f"{_load_words(p.load)} to {p.url}/v1/completions"
    return doc


def dry_run_lines(doc: dict[str, Any]) -> list[str]:
    """``dry_run``'s document as text: the launch commands, the serving load, the SLOs."""
    from gpufabric.bench.slo import describe

    out = list(doc["commands"])
    if doc["sbatch_script"]:
        what = "TrainJob manifest" if doc["launcher"] == "k8s" else "sbatch script (kept with the run)"
        out += [f"# {what}:", *doc["sbatch_script"].rstrip("\n").split("\n")]
    if doc["load_words"]:
        out.append(f"# serving load: {doc['load_words']}")
    if doc["slos"]:
        out += ["# SLOs:", *(f"#   {line}" for line in describe(doc["slos"]))]
    return out


def _load_result(res: loadgen.LoadResult, started: float, url: str) -> tuple[TestResult, dict[str, Any]]:
    summary = res.summary()
    metrics = tuple(
        Metric(name=k, value=float(summary[k]), unit=u, direction=d)
        for k, u, d in LOAD_METRICS
        if summary[k] == summary[k]  # NaN when no request streamed two tokens
    )
    ok = summary["requests"] > summary["failed"]
    errors = sorted({t.error for t in res.timings if t.error})
    result = TestResult(
        name=LOAD_TEST,
        tool="gpufabric.loadgen",
        host=url,
        status=Status.ok if ok else Status.failed,
        metrics=metrics,
        reason="" if ok else ("; ".join(errors[:3]) or "no request finished"),
        started_at=started,
        duration_s=res.duration_s,
        params={k: str(v) for k, v in _load_dict(res.spec).items() if v is not None},
    )
    return result, summary


def _run_load(run: service.Session, p: PreparedInference, send: loadgen.Send) -> tuple[dict[str, Any], list[Verdict]]:
    assert p.load is not None
    started = time.time()
    res = loadgen.run_load(p.load, send)
    if res.interrupted:
        run.interrupted = res.interruption or KeyboardInterrupt()  # the run ends interrupted: exit 130 or 143
    result, summary = _load_result(res, started, p.url)
    own = []
    if summary["failed"]:
        own.append(
            Verdict(
                test=LOAD_TEST,
                metric="failed",
                host=p.url,
                outcome=Outcome.failed,
                measured=float(summary["failed"]),
                expected=0.0,
                direction=Direction.lower,
                margin=None,
                reason=f"{summary['failed']} of {summary['requests']} requests failed: {result.reason or 'see the run'}",
            )
        )
    verdicts = run.judge([result], own, service.Judging(slos=p.load_slos))
    return summary, verdicts


def run(
    p: PreparedInference, *, db: str | None, argv: Sequence[str], send: loadgen.Send | None = None
) -> InferenceReport:
    """Run the parts in one recorded run (``send`` overrides the HTTP client, for tests)."""
    from gpufabric.bench.probes.inference import run_inference

    if p.load is not None and send is None:
        send = loadgen.openai_stream(p.url, p.served_model)
    holder: dict[str, Any] = {}

    def load_part(session: service.Session) -> list[Verdict]:
        assert send is not None
        holder["summary"], holder["verdicts"] = _run_load(session, p, send)
        return holder["verdicts"]

    outcome = run_inference(
        sizes=p.sizes,
        design=p.design,
        kv_config=p.kv_config,
        opts=p.opts,
        load_config=p.load_config,
        load_opts=p.load_opts,
        db=db,
        argv=argv,
        judging=p.judging,
        spec_name=p.name,
        serving_load=load_part if p.load is not None else None,
    )
    return InferenceReport(
        prepared=p,
        outcome=outcome,
        load_summary=holder.get("summary"),
        load_verdicts=tuple(holder.get("verdicts", ())),
    )

"""gpufabric against the peers issue 32 names, measured in the same run (issue 32 item 5).

The peers are not dependencies of gpufabric. Give the Python that has llm-analysis
(``pip install llm-analysis``) as ``--peer-python`` and a Calculon checkout
(github.com/calculon-ai/calculon; it needs pandas and psutil in that Python) as
``--calculon``; a peer not given is skipped with a line saying so.

    .venv/bin/python benchmarks/bench_peers.py --peer-python /tmp/peers/bin/python \\
        --calculon /tmp/calculon [--runs 3] [--configs 300]

Two figures, each the median of ``--runs`` fresh processes, the tools alternating (the
machine is shared: load hits every tool alike):

- **CLI**: CPU (user + sys of the child) of one training estimate from the command line:
  ``gpufabric plan examples/llama3-70b-1k.yaml``; llm-analysis's ``train`` (Llama-2 70B on
  1,024 H100, TP 8 x PP 4); Calculon's ``llm`` on its shipped Megatron-1T example.
- **Configurations per CPU second** through each library, every configuration with its
  own global batch: ``gpufabric.api.evaluate`` on bench_api's single-design
  configurations (one at a time, and as one batch); llm-analysis's
  ``LLMAnalysis(...).training()``; Calculon's ``Llm.compile`` and ``run``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LLM_ANALYSIS_CLI = [
    "-m",
    "llm_analysis.analysis",
    "train",
    "--model_name=upstage_Llama-2-70b-instruct-v2",
    "--gpu_name=h100-sxm-80gb",
    "--total_num_gpus=1024",
    "--tp_size=8",
    "--pp_size=4",
    "--global_batch_size=1024",
    "--seq_len=4096",
    "--flops_efficiency=0.45",
    "--hbm_memory_efficiency=0.9",
    "--log_level=ERROR",
]

#: One llm-analysis configuration per global batch (the model and GPU configs built once,
#: as a sweep over one model would); prints configurations per CPU second.
LLM_ANALYSIS_LOOP = """
import sys, time
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
model = get_model_config_by_name("upstage_Llama-2-70b-instruct-v2")
gpu = get_gpu_config_by_name("h100-sxm-80gb")
par = ParallelismConfig(tp_size=8, pp_size=4, dp_size=32)
n = int(sys.argv[1])
start = time.process_time()
for i in range(n):
    a = LLMAnalysis(model, gpu, parallelism_config=par, flops_efficiency=0.45, hbm_memory_efficiency=0.9)
    a.training(global_batch_size=1024 + 32 * i, seq_len=4096, batch_size_per_gpu=1)
print(n / (time.process_time() - start))
"""

#: One Calculon configuration per global batch (the shipped Megatron-1T example on A100s,
#: batch stepped by data_par x microbatch so each stays valid).
CALCULON_LOOP = """
import logging, sys, time
import calculon
from calculon.llm import Llm
from calculon.system import System
root = sys.argv[2]
app = Llm.Application(calculon.io.read_json_file(root + "/models/megatron-1T.json"))
exe_json = calculon.io.read_json_file(root + "/examples/3072_t4_p64_d12_mbs4_full.json")
syst = System(calculon.io.read_json_file(root + "/systems/a100_80g.json"))
log = logging.getLogger("bench")
n = int(sys.argv[1])
start = time.process_time()
for i in range(n):
    exe_json["batch_size"] = 3072 + 48 * i
    model = Llm(app, log)
    model.compile(syst, Llm.Execution.from_json(exe_json))
    model.run(syst)
print(n / (time.process_time() - start))
"""


def _child_cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(user + sys CPU seconds of ``cmd``'s own process, its stdout); raises if it fails."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, before Popen reaps it
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, out


def _tools(peer_python: str | None, calculon: Path | None) -> dict[str, dict[str, list[str]]]:
    """Each tool's CLI command and its configurations-per-CPU-second command ("{n}": the count)."""
    ours = [sys.executable, "-m", "gpufabric"]
    tools = {
        "gpufabric": {
            "cli": [*ours, "plan", "examples/llama3-70b-1k.yaml"],
            "loop": [sys.executable, str(ROOT / "benchmarks" / "bench_api.py"), "--child", "--configs", "{n}"],
        }
    }
    if peer_python:
        tools["llm-analysis"] = {
            "cli": [peer_python, *LLM_ANALYSIS_CLI],
            "loop": [peer_python, "-c", LLM_ANALYSIS_LOOP, "{n}"],
        }
    if peer_python and calculon:
        tools["Calculon"] = {
            "cli": [
                peer_python,
                str(calculon / "bin" / "calculon"),
                "llm",
                str(calculon / "models" / "megatron-1T.json"),
                str(calculon / "examples" / "3072_t4_p64_d12_mbs4_full.json"),
                str(calculon / "systems" / "a100_80g.json"),
                "-",  # the stats to stdout
            ],
            "loop": [peer_python, "-c", CALCULON_LOOP, "{n}", str(calculon)],
        }
    return tools


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-python", help="a Python with llm-analysis installed (and pandas, psutil for Calculon)")
    ap.add_argument("--calculon", type=Path, help="a Calculon checkout (github.com/calculon-ai/calculon)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--configs", type=int, default=300)
    args = ap.parse_args()
    if not args.peer_python:
        print("llm-analysis and Calculon: skipped (no --peer-python)")
    elif not args.calculon:
        print("Calculon: skipped (no --calculon)")
    paths = [str(ROOT / "src")] + ([str(args.calculon)] if args.calculon else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode compiled
    tools = _tools(args.peer_python, args.calculon)
    for spec in tools.values():  # one unmeasured run each: bytecode and caches warm
        _child_cpu(spec["cli"], env)
    cli: dict[str, list[float]] = {name: [] for name in tools}
    rate: dict[str, list[float]] = {name: [] for name in tools}
    single: list[float] = []
    for _ in range(args.runs):
        for name, spec in tools.items():
            cli[name].append(_child_cpu(spec["cli"], env)[0])
            loop = [a.replace("{n}", str(args.configs)) for a in spec["loop"]]
            out = _child_cpu(loop, env)[1].split()
            if name == "gpufabric":  # bench_api's child prints one-at-a-time and batch rates
                single.append(float(out[0]))
            rate[name].append(float(out[-1]))
    print("| tool | CLI CPU s (runs) | configurations per CPU s (runs) |\n|---|---|---|")
    for name in tools:
        runs = ", ".join(f"{r:,.0f}" for r in rate[name])
        cli_runs = ", ".join(f"{c:.2f}" for c in cli[name])
        shown = "batch " if name == "gpufabric" else ""
        print(
            f"| {name} | {statistics.median(cli[name]):.2f} ({cli_runs}) | {shown}{statistics.median(rate[name]):,.0f} ({runs}) |"
        )
    print(
        f"| gpufabric, one at a time | | {statistics.median(single):,.0f} ({', '.join(f'{s:,.0f}' for s in single)}) |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

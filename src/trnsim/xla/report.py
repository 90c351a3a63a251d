"""The per-step report of a simulated torch-xla run: the summary dict, its table, TensorBoard scalars.

Steady-state figures average the steps that compiled nothing and set nothing up (every step when none is
such). MFU is the graph's dot FLOPs over the step time and the rank's dense BF16 peak, as Neuron reports it.
"""
from __future__ import annotations

from trnsim.errors import TrnsimError
from trnsim.plan import Cluster

GIB = 2**30


class ZeroStepError(TrnsimError):
    """A run whose steps price at zero: a step time of 0 ms would be a silent wrong answer."""


def unpriced_text(unpriced: dict[str, int]) -> str:
    """`custom-call(foo) x3, cholesky x1`: the ops no model priced, most frequent first."""
    return ", ".join(f"{k} x{n}" for k, n in sorted(unpriced.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(ledger: dict, cluster: Cluster, *, world: int, procs: int, script: str, wall_s: float,
              batch_size: int | None = None) -> dict:
    steps = ledger["steps"]
    steady = [s for s in steps if not s["compilations"] and not s.get("warm_up")] or steps
    n = max(len(steady), 1)
    step_ns = sum(s["time_ns"] for s in steady) / n
    unpriced = ledger.get("unpriced", {})
    if step_ns <= 0:
        graphs = sum(s["graphs"] for s in steps)
        why = (f"ops no model prices: {unpriced_text(unpriced)}" if unpriced else
               "no graph ran on the device between the steps" if not graphs else "its graphs hold no priced work")
        raise ZeroStepError(f"{script}: {len(steps)} step(s) ran and each priced at 0 ms ({graphs} graph(s)); {why}. "
                            f"trnsim will not report a step time it cannot price")
    flops = sum(s["flops"] for s in steady) / n
    engines = {k: sum(s["engines_ns"].get(k, 0.0) for s in steady) / n for k in ("tensor", "vector", "scalar", "dma")}
    peak = cluster.system.chip.peak_flops("bf16") / cluster.ranks_per_chip
    per_s = 1e9 / step_ns if step_ns else 0.0
    memory = max((s["memory_bytes"] for s in steps), default=0.0)
    out = {
        "script": script, "instance": cluster.system.name, "nodes": cluster.nodes, "lnc": cluster.lnc,
        "world": world, "processes": procs, "steps": len(steps),
        "step_time_ms": step_ns / 1e6,
        "breakdown_ms": {**{k: v / 1e6 for k, v in engines.items()},
                         "hbm": sum(s["hbm_bound_ns"] for s in steady) / n / 1e6,
                         "collective": sum(s["collective_ns"] for s in steady) / n / 1e6,
                         "gpsimd_custom_op": sum(s.get("custom_op_ns", 0.0) for s in steady) / n / 1e6},
        "custom_ops": _custom_ops(steady),
        "steps_per_s": per_s,
        "samples_per_s": per_s * batch_size * world if batch_size else None,
        "tflops_per_rank": flops * per_s / 1e12,
        "mfu": flops * per_s / peak if peak else 0.0,
        "memory_per_core_gib": memory / GIB, "hbm_per_core_gib": cluster.hbm_bytes_per_rank / GIB,
        "compilations": ledger["compilations"], "cache_hits": ledger["cache_hits"], "graphs": ledger["graphs"],
        "warm_up": _warm_up(ledger["compilations"]),
        "unpriced": unpriced, "estimates": ledger.get("estimates", []), "graph_breaks": ledger.get("graph_breaks", []),
        "per_step": [{"step": i + 1, "time_ms": s["time_ns"] / 1e6, "compilations": s["compilations"],
                      "mfu": s["flops"] / (s["time_ns"] * 1e-9) / peak if s["time_ns"] and peak else 0.0,
                      "steps_per_s": 1e9 / s["time_ns"] if s["time_ns"] else 0.0,
                      "compile_s": s.get("compile_ns", 0.0) / 1e9,
                      "collectives": {op: c["calls"] for op, c in s.get("collectives", {}).items()}}
                     for i, s in enumerate(steps)],
        "wall_s": wall_s,
    }
    return out


def _warm_up(compilations: list[dict]) -> dict:
    """The compilations' estimated wall time (an assumed model: specs/data/training.toml [compile]) and how
    many the persistent cache spared."""
    return {"compile_s": sum(c.get("compile_s", 0.0) for c in compilations),
            "compiled": sum(c.get("cache") == "miss" for c in compilations),
            "persistent_cache_hits": sum(c.get("cache") == "hit" for c in compilations),
            "estimate": "assumed compile-time model (specs/data/training.toml [compile]); no published figure"}


def _custom_ops(steady: list[dict]) -> dict:
    """Per custom operator: calls and GpSimd milliseconds per steady step."""
    out: dict = {}
    for s in steady:
        for name, c in s.get("custom_ops", {}).items():
            o = out.setdefault(name, {"calls_per_step": 0.0, "time_ms_per_step": 0.0})
            o["calls_per_step"] += c["calls"] / len(steady)
            o["time_ms_per_step"] += c["time_ns"] / 1e6 / len(steady)
    return out


def render(rep: dict, console) -> None:
    """The end-of-run summary as a rich table."""
    from rich.table import Table

    t = Table(title=f"{rep['script']} on {rep['nodes']} x {rep['instance']} (LNC {rep['lnc']}), "
                    f"{rep['world']} ranks", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("simulated step time", f"{rep['step_time_ms']:.3f} ms (steady state, {rep['steps']} steps run)")
    parts = ", ".join(f"{k} {v:.3f}" for k, v in rep["breakdown_ms"].items() if v > 0)
    t.add_row("  by engine (ms)", parts or "-")
    for name, c in rep.get("custom_ops", {}).items():
        t.add_row(f"  custom op {name}", f"GpSimd {c['time_ms_per_step']:.3f} ms per step ({c['calls_per_step']:g} calls)")
    t.add_row("throughput", f"{rep['steps_per_s']:.1f} steps/s" + (f", {rep['samples_per_s']:.0f} samples/s"
                                                                   if rep["samples_per_s"] else ""))
    t.add_row("MFU", f"{100 * rep['mfu']:.2f}% ({rep['tflops_per_rank']:.3f} TFLOP/s per rank of BF16 peak)")
    t.add_row("memory per NeuronCore", f"{rep['memory_per_core_gib']:.3f} GiB of {rep['hbm_per_core_gib']:.1f} GiB")
    if rep["unpriced"]:
        t.add_row("unpriced ops", f"[red]{unpriced_text(rep['unpriced'])}[/red]: no model prices them; the step time "
                                  f"leaves them out")
    for e in rep["estimates"]:
        t.add_row("estimate", e)
    for b in rep.get("graph_breaks", []):
        t.add_row("graph break", f"{b['line']}: {b['reason']} (x{b['count']})")
    t.add_row("compilations", f"{len(rep['compilations'])} ({rep['cache_hits']} cache hits)")
    w = rep.get("warm_up")
    if w and rep["compilations"]:
        t.add_row("warm-up (estimate)", f"{w['compile_s']:.1f} s compiling {w['compiled']} graph(s), "
                                        f"{w['persistent_cache_hits']} loaded from the persistent cache; an assumed "
                                        f"compile-time model, apart from the step time")
    for c in rep["compilations"]:
        cached = {"hit": " [persistent cache hit]", "miss": f" [~{c.get('compile_s', 0):.1f} s]"}.get(c.get("cache"), "")
        t.add_row(f"  step {c['step']}", f"{c['line']}: {c['cause']}{cached}")
    if rep["processes"] < rep["world"]:
        t.add_row("ranks run", f"{rep['processes']} of {rep['world']} as processes; the rest timed, not run")
    t.add_row("host time", f"{rep['wall_s']:.1f} s")
    console.print(t)


def tensorboard(rep: dict, logdir: str) -> None:
    """Scalars per step: simulated step time, throughput and MFU (torch's SummaryWriter)."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(logdir)
    for s in rep["per_step"]:
        w.add_scalar("trnsim/step_time_ms", s["time_ms"], s["step"])
        w.add_scalar("trnsim/steps_per_s", s["steps_per_s"], s["step"])
        w.add_scalar("trnsim/mfu", s["mfu"], s["step"])
    w.close()

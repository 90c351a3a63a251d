"""Timing-model speed: the fully optimised matmul ladder kernel at the published shape, timing only.

Prints one JSON object: wall seconds to run the kernel on shapes (front end and checks) and to schedule
its stream, instructions per second, and simulated NeuronCore cycles (at the core's base clock) per
wall second (CPU seconds too: on a shared machine they show what an idle one would take). `--ladder` adds the calibration table: every ladder step on trn1 against the published
latency and HFU (reference/calibration.md 1.1), and the trn2 engine-active shares. `--calibration`
prints every kernel figure of calibration.md (1.1 both ladders: the current-API ladder and its beta twin;
the trn2 shares; 1.3 the fused Mamba sweep) simulated against published, with the error and the wall
seconds each timing-only run took; `--quick` leaves out the Mamba points above seq 2048, `--markdown`
adds the table docs/timing.md quotes.

`--compare` measures the same kernels several ways in one run, each in its own process, and prints them
side by side with the speed-ups: the speed layer off (TRNSIM_FAST=0) and on (with the modules trnsim/compiled.py
built, when they are: `compiled_modules` counts them), plus, with `--against REV`,
the source tree of git revision REV (before) against this one. `--all` compares every ladder step, not
only the optimised one; `--repeat N` runs N rounds in which the ways take turns (a fresh process each, the faster of
two runs) and keeps each way's fastest. The simulated figures (latency,
instructions) of every way must be the same: `same_figures` says whether they are. The CPU speed-up is also
given for each half of a run apart (`speedup_cpu_frontend`: the kernel traced on shapes; `speedup_cpu_schedule`:
its stream scheduled), so a change shows where it moved the time. `--instructions` adds each
way's count of CPU instructions for one run (trace and schedule) under valgrind's callgrind, which, unlike
seconds, does not move with the machine's load (`speedup_instructions`); it needs valgrind and takes minutes.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import matmul_ladder as ladder  # noqa: E402

from trnsim import specs  # noqa: E402
from trnsim.core.timing import simulate, summarize  # noqa: E402

PUBLISHED = {"matmul_tiled": (51.80, 0.1098), "matmul_hoisted": (42.96, 0.1324), "matmul_blocked": (22.07, 0.2651),
             "matmul_optimized": (6.97, 0.8524)}  # ms, HFU: the 2024 tutorial table
TILED_2025 = 20.99  # ms: the tiled step with a 2025 compiler, trn1.2xlarge
# Each figure is timed under the software stack it was published with (TRNSIM_NEURON_SDK, specs/timing.py): the
# 2024 tutorial table and the fused Mamba tutorial (Neuron 2.20, 2024-09-16) under 2024, the 20.99 ms tiled
# figure and the Trn2 guide's profiles under 2025.


def run(kernel, target):
    lhsT, rhs = (np.zeros((ladder.SHAPE["K"], ladder.SHAPE[d]), ladder.nl.bfloat16.np)
                 for d in "MN")
    t0, c0 = time.perf_counter(), time.process_time()
    cores = kernel.trace(lhsT, rhs, target=target, values=False)
    t1, c1 = time.perf_counter(), time.process_time()
    tl = simulate(cores[0].stream, target)
    t2, c2 = time.perf_counter(), time.process_time()
    return summarize(kernel.__name__, [tl], cores[0].spec), len(cores[0].stream), (t1 - t0, c1 - c0), (t2 - t1, c2 - c1)


MAMBA = [("mamba_v1", 256, 512, 0.17293), ("mamba_v1", 4096, 512, 2.34)] + [
    (f"mamba_v{v}", 4096, seq, ms) for seq, v2, v3 in (
        (512, 1.61, 1.6), (1024, 4.4, 3.3), (2048, 8.9, 6.6), (3072, 13.1, 10.1), (4096, 17.6, 13.3),
        (5120, 23.7, 17.3), (6144, 27.5, 19.6), (7168, 41.3, 24.2), (8192, 52.2, 27.8)) for v, ms in ((2, v2), (3, v3))]
# The trn2 shares come from the NKI kernel-optimisation guide (nki/guides/tutorials/kernel-optimization.rst),
# whose driver passes float32 arrays: the profiled kernels multiply fp32 (a quarter-rate matmul). Its
# 21.54% DMA / 99.50% TensorE / 10.55% VectorE profile (the figure calibration.md lists as "blocked") is
# the step that blocks all three dims and sums K blocks in SBUF with tensor_tensor: matmul_optimized.
TRN2_SHARES = {"matmul_tiled": {"DMA": 0.9993, "TensorE": 0.8728}, "matmul_hoisted": {"DMA": 0.9973, "TensorE": 0.9985},
               "matmul_optimized": {"DMA": 0.2154, "TensorE": 0.9950, "VectorE": 0.1055}}


def _timed(kernel, args, target, sdk):
    """One timing-only run under the software stack (Neuron SDK release year) its figure was published with."""
    from trnsim import flags  # a tree from before it has none: --against imports only what every tree has
    t0 = time.perf_counter()
    flags.NEURON_SDK.set(sdk)
    cores = kernel.trace(*args, target=target, values=False)
    r = summarize(kernel.__name__, [simulate(cores[0].stream, target)], cores[0].spec)
    return r, time.perf_counter() - t0


def calibration():
    """Every kernel figure of calibration.md: simulated vs published, error, wall seconds."""
    import mamba
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "nki_beta"))
    import test_twin as twin
    quick = "--quick" in sys.argv
    shapes = [np.zeros((ladder.SHAPE["K"], ladder.SHAPE[d]), ladder.nl.bfloat16.np) for d in "MN"]
    rows, shares = [], []

    def row(what, sim_ms, pub_ms, wall, **extra):
        rows.append({"figure": what, "simulated_ms": round(sim_ms, 4), "published_ms": pub_ms,
                     "error": round(sim_ms / pub_ms - 1, 4), "wall_s": round(wall, 1), **extra})
        print(json.dumps(rows[-1]), flush=True)

    beta = {k.__name__: getattr(twin, "beta_" + k.__name__, None) for k in ladder.LADDER}
    for k in ladder.LADDER:
        ms, _ = PUBLISHED[k.__name__]
        for api, kern in (("current", k), ("beta", beta[k.__name__])):
            if kern is None:
                continue
            r, wall = _timed(kern, shapes, "trn1", "2024")
            row(f"1.1 {k.__name__} ({api} API, trn1)", r.latency / 1e6, ms, wall, bound=r.bound, hfu=round(r.hfu, 4),
                sdk="2024")
        if k is ladder.matmul_tiled:  # the same kernel with a 2025 compiler, on a trn1.2xlarge
            r, wall = _timed(k, shapes, "trn1", "2025")
            row("1.1 matmul_tiled (current API, trn1, 2025 compiler)", r.latency / 1e6, TILED_2025, wall, bound=r.bound,
                hfu=round(r.hfu, 4), sdk="2025")
        if k.__name__ in TRN2_SHARES:
            r, wall = _timed(k, [x.astype(np.float32) for x in shapes], "trn2", "2025")
            shares.append({"figure": f"1.1 {k.__name__} trn2 shares (fp32 inputs)", "wall_s": round(wall, 1), **{
                e: {"simulated": round(r.share.get(e, 0.0), 4), "published": v} for e, v in TRN2_SHARES[k.__name__].items()}})
            print(json.dumps(shares[-1]), flush=True)
    for name, ch, seq, ms in MAMBA:
        if quick and seq > 2048:
            continue
        args = [np.zeros(x.shape, np.float32) for x in mamba.inputs(ch, seq, state=16)]
        r, wall = _timed(getattr(mamba, name), args, "trn1", "2024")
        spills = {"spills": r.spill_line} if r.spill_line else {}  # v2 from seq 7168: SBUF spills, as on hardware
        row(f"1.3 {name} channels={ch} seq={seq}", r.latency / 1e6, ms, wall, bound=r.bound,
            vector_share=round(r.share.get("VectorE", 0.0), 4), sdk="2024", **spills)
    errs = [abs(x["error"]) for x in rows]
    print(json.dumps({"figures": len(rows), "within_15pct": sum(e <= 0.15 for e in errs), "max_abs_error": max(errs)}))
    if "--markdown" in sys.argv:
        print(markdown(rows, shares))


def markdown(rows, shares) -> str:
    """The calibration rows as the table docs/timing.md quotes."""
    def ms(x):
        return f"{x * 1e3:.1f} us" if x < 1 else f"{x:.2f} ms"
    out = ["| figure | SDK | simulated | published | error | bound by | wall |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['figure']} | {r['sdk']} | {ms(r['simulated_ms'])} | {ms(r['published_ms'])} | "
                   f"{r['error']:+.1%} | {r['bound']} | {r['wall_s']} s |")
    for s in shares:
        pairs = "; ".join(f"{e} {v['simulated']:.1%} / {v['published']:.2%}" for e, v in s.items() if isinstance(v, dict))
        out.append(f"| {s['figure']} (simulated / published) | 2025 | {pairs} | | | | {s['wall_s']} s |")
    return "\n".join(out)


def _arg(flag, default=None):
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else default


def measure(names, repeat):
    """Per kernel: its fastest of `repeat` timing-only runs (wall and CPU seconds, front end and schedule)."""
    target, base = "trn1", specs.neuroncore("trn1").clocks["base"]
    out = []
    for name in names:
        best = None
        for _ in range(repeat):
            r, n, front, sched = run(getattr(ladder, name), target)
            if best is None or front[0] + sched[0] < best[2][0] + best[3][0]:
                best = (r, n, front, sched)
        r, n, front, sched = best
        wall, cpu = front[0] + sched[0], front[1] + sched[1]
        out.append({"kernel": name, "instructions": n, "simulated_latency_ms": r.latency / 1e6,
                    "wall_s": round(wall, 3), "wall_frontend_s": round(front[0], 3), "wall_schedule_s": round(sched[0], 3),
                    "cpu_s": round(cpu, 3), "cpu_frontend_s": round(front[1], 3), "cpu_schedule_s": round(sched[1], 3),
                    "instructions_per_s": round(n / wall), "instructions_per_cpu_s": round(n / cpu),
                    "simulated_cycles_per_s": round(r.latency * 1e-9 * base / wall), "compiled_modules": _compiled()})
    return out


def _compiled() -> int:
    """How many modules this process runs compiled (trnsim/compiled.py; a tree from before it has none)."""
    mod = sys.modules.get("trnsim.compiled")
    return len(mod.loaded()) if mod is not None else 0


def count(name):
    """One timing-only run of ladder kernel `name` (its trace and schedule, nothing else), or nothing when
    `name` is empty: what `--instructions` counts under callgrind, the second run being the part to subtract."""
    if name:
        kernel = getattr(ladder, name)
        lhsT, rhs = (np.zeros((ladder.SHAPE["K"], ladder.SHAPE[d]), ladder.nl.bfloat16.np) for d in "MN")
        simulate(kernel.trace(lhsT, rhs, target="trn1", values=False)[0].stream, "trn1")


def instructions(name, env) -> int:
    """CPU instructions (callgrind's Ir) that one run of `name` takes in a fresh process with `env`."""
    if shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    counts = []
    for what in (name, ""):
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
                            "--count", what], env=env, capture_output=True, text=True, check=True)
        counts.append(int(re.search(r"Collected : (\d+)", p.stderr).group(1)))
    return counts[0] - counts[1]


def compare():
    """The kernels measured each way in a fresh process (speed layer off/on, and a git revision's source)."""
    names = [k.__name__ for k in ladder.LADDER] if "--all" in sys.argv else ["matmul_optimized"]
    repeat, against = int(_arg("--repeat", 1)), _arg("--against")
    root = Path(__file__).resolve().parents[1]
    ways = [("fast off", {"TRNSIM_FAST": "0"}, None), ("fast on", {"TRNSIM_FAST": "1"}, None)]
    with tempfile.TemporaryDirectory() as tmp:
        if against:
            tree = subprocess.run(["git", "-C", str(root), "archive", against, "src"], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tree, check=True)
            ways.insert(0, (f"before ({against})", {"TRNSIM_FAST": "1"}, str(Path(tmp) / "src")))
        envs = {}
        for label, env, src in ways:
            envs[label] = dict(os.environ, **env)
            if src:
                envs[label]["PYTHONPATH"] = os.pathsep.join([src, envs[label].get("PYTHONPATH", "")])
        # The ways take turns, a fresh process each per round (its faster of two runs: the first one also
        # pays the one-time costs), so a machine that slows down or speeds up meanwhile moves every way
        # alike; each way keeps its fastest round, kernel by kernel.
        rows = {}
        for _ in range(repeat):
            for label, _, _ in ways:
                p = subprocess.run([sys.executable, __file__, "--one", ",".join(names), "2"], env=envs[label],
                                   capture_output=True, text=True, check=True)
                got = json.loads(p.stdout)
                rows[label] = [new if old is None or new["wall_s"] < old["wall_s"] else old
                               for old, new in zip(rows.get(label, [None] * len(got)), got)]
        if "--instructions" in sys.argv:
            for label, _, _ in ways:
                for row, name in zip(rows[label], names):
                    row["cpu_instructions"] = instructions(name, envs[label])
    first, last = ways[0][0], ways[-1][0]
    out = []
    for i, name in enumerate(names):
        per = {label: rows[label][i] for label, _, _ in ways}
        figures = {(x["instructions"], x["simulated_latency_ms"]) for x in per.values()}
        out.append({"kernel": name, "ways": per, "same_figures": len(figures) == 1,
                    "speedup_wall": round(per[first]["wall_s"] / per[last]["wall_s"], 2),
                    "speedup_cpu": round(per[first]["cpu_s"] / per[last]["cpu_s"], 2),
                    # the two halves apart: the front end (kernel Python, checks, records) and the scheduler
                    "speedup_cpu_frontend": round(per[first]["cpu_frontend_s"] / per[last]["cpu_frontend_s"], 2),
                    "speedup_cpu_schedule": round(per[first]["cpu_schedule_s"] / per[last]["cpu_schedule_s"], 2)})
        if "--instructions" in sys.argv:
            out[-1]["speedup_instructions"] = round(per[first]["cpu_instructions"] / per[last]["cpu_instructions"], 2)
    print(json.dumps({"target": "trn1", "shape": ladder.SHAPE, "repeat": repeat, "speedup_of": f"{last} over {first}",
                      "kernels": out}, indent=2))


def main():
    if "--calibration" in sys.argv:
        return calibration()
    if "--count" in sys.argv:
        return count(_arg("--count"))
    if "--one" in sys.argv:
        return print(json.dumps(measure(_arg("--one").split(","), int(sys.argv[sys.argv.index("--one") + 2]))))
    if "--compare" in sys.argv or "--against" in sys.argv:
        return compare()
    target = "trn1"
    r, n, front, sched = run(ladder.matmul_optimized, target)
    base = specs.neuroncore(target).clocks["base"]
    wall = front[0] + sched[0]
    out = {"kernel": r.kernel, "target": target, "shape": ladder.SHAPE, "instructions": n,
           "simulated_latency_ms": r.latency / 1e6, "hfu": r.hfu,
           "wall_s": wall, "wall_frontend_s": front[0], "wall_schedule_s": sched[0],
           "cpu_s": front[1] + sched[1], "cpu_frontend_s": front[1], "cpu_schedule_s": sched[1],
           "instructions_per_s": n / wall, "simulated_cycles_per_s": r.latency * 1e-9 * base / wall,
           "compiled_modules": _compiled()}
    if "--ladder" in sys.argv:
        from trnsim import flags
        rows = []
        flags.NEURON_SDK.set("2024")  # the published table's stack
        for k in ladder.LADDER:
            r1 = run(k, "trn1")[0]
            r2 = run(k, "trn2")[0]
            ms, hfu = PUBLISHED[k.__name__]
            rows.append({"step": k.__name__, "trn1_ms": r1.latency / 1e6, "published_ms": ms,
                         "error": r1.latency / 1e6 / ms - 1, "trn1_hfu": r1.hfu, "published_hfu": hfu,
                         "trn1_bound": r1.bound, "trn2_ms": r2.latency / 1e6, "trn2_bound": r2.bound,
                         "trn2_share": {t: round(v, 3) for t, v in r2.share.items() if not t.startswith("DMA q")}})
        out["ladder"] = rows
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

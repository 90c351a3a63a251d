"""`trnsim jax SCRIPT.py`: a JAX training script on N simulated NeuronCores, its steps priced.

    python -m trnsim.xla.jaxrun script.py [args...]     (started by `run`, in a process of its own)

The script runs unchanged on JAX's CPU backend with N host devices standing for the N NeuronCores
(XLA_FLAGS=--xla_force_host_platform_device_count=N, set before JAX starts), so `jax.devices()`, `pmap`,
`jit` with shardings and `psum` compute the real values. Every call of a `jax.jit` or `jax.pmap` function
from the script (not one traced inside another) is a graph run on the devices: priced once per function and
input signature on a NeuronCore of the instance (a pmap's per-device body as lowered; a jit over several
devices as XLA partitioned it, one device's share), its collectives timed on the fabric over the devices
it spans. The first run of a signature is a compilation (charged to the warm-up, or loaded from the
persistent cache). A step is the run of distinct functions until one is called again: a loop that calls
`train_step` (and perhaps an evaluation) once per iteration has one step per iteration.
"""
from __future__ import annotations

import json
import os
import sys

from trnsim import flags
from trnsim.errors import ConfigError

ENV = flags.JAX.name  # JSON: instance, lnc, devices, out, script


class JaxLedger:
    """Prices the script's compiled calls into a Ledger and cuts the steps."""

    def __init__(self, cfg: dict):
        from trnsim.plan import Cluster
        from trnsim.xla.cost import CostModel
        from trnsim.xla.graphs import CompileCache, Ledger

        self.cluster = Cluster(cfg["instance"], lnc=cfg["lnc"])
        self.ledger = Ledger(CostModel(self.cluster, world=cfg["devices"]), cache=CompileCache(run=cfg["out"]))
        self.models = {cfg["devices"]: self.ledger.model}
        self.costs: dict = {}  # (function, signature) -> GraphCost
        self.in_step: set = set()
        self.depth = 0  # inside a priced call (a jit called while another runs is part of it)

    def model(self, ranks: int):
        from trnsim.xla.cost import CostModel

        if ranks not in self.models:
            self.models[ranks] = CostModel(self.cluster, world=ranks)
        return self.models[ranks]

    def call(self, kind: str, fn, compiled, args, kwargs):
        import jax

        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if self.depth or any(isinstance(x, jax.core.Tracer) for x in leaves):
            return compiled(*args, **kwargs)  # traced into an enclosing function: priced with it
        sig = (id(fn), kind, tuple((getattr(x, "shape", None), str(getattr(x, "dtype", type(x)))) for x in leaves))
        if sig in self.in_step:  # the cycle repeats: a new step
            self.ledger.end_step()
            self.in_step.clear()
        self.in_step.add(sig)
        cost = self.costs.get(sig)
        from trnsim.xla.neuron import user_line

        line = user_line()
        if cost is None:
            cost = self.costs[sig] = self._price(kind, compiled, args, kwargs, leaves)
            shapes = ", ".join(f"{d}{list(s)}" for s, d in sig[2] if s is not None)
            self.ledger.compiled_graph(f"{kind}:{getattr(fn, '__qualname__', fn)}:{shapes}", line, kind, shapes, cost)
        else:
            self.ledger.hits += 1
        self.ledger.charge(cost, name=f"{kind} {getattr(fn, '__name__', 'fn')}")
        self.depth += 1
        try:
            return compiled(*args, **kwargs)
        finally:
            self.depth -= 1

    def _price(self, kind, compiled, args, kwargs, leaves):
        lowered = compiled.lower(*args, **kwargs)
        if kind == "pmap":  # one device's body, its collectives over the mapped devices
            ranks = max((x.shape[0] for x in leaves if getattr(x, "ndim", 0)), default=1)
            return self.model(ranks).cost(lowered.as_text(dialect="hlo"))
        devices = max((len(x.sharding.device_set) for x in leaves if hasattr(x, "sharding")), default=1)
        if devices <= 1:  # one device: the graph as written, fused by the cost model as the compiler fuses
            return self.model(1).cost(lowered.as_text(dialect="hlo"))
        return self.model(devices).cost(lowered.compile().as_text())  # partitioned: one device's share


class _Priced:
    """A jit or pmap function whose calls from the script are priced; everything else passes through."""

    def __init__(self, book: JaxLedger, kind: str, fn, compiled):
        self._book, self._kind, self._fn, self._compiled = book, kind, fn, compiled

    def __call__(self, *args, **kwargs):
        return self._book.call(self._kind, self._fn, self._compiled, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def _patch(book: JaxLedger) -> None:
    import functools

    import jax

    def wrapping(kind, original):
        @functools.wraps(original)
        def wrapper(fun=None, *args, **kwargs):
            if fun is None:  # @jax.jit(static_argnums=...) style
                return lambda f: wrapper(f, *args, **kwargs)
            return _Priced(book, kind, fun, original(fun, *args, **kwargs))
        return wrapper

    jax.jit = wrapping("jit", jax.jit)
    jax.pmap = wrapping("pmap", jax.pmap)


def main(argv: list[str]) -> int:
    from trnsim.xla.worker import run_script

    cfg = json.loads(os.environ[ENV])
    book = JaxLedger(cfg)
    _patch(book)
    error, code = run_script(cfg["script"], argv[1:])
    led = book.ledger
    if led.current.graphs:
        led.end_step()
    out = {"steps": [s.to_dict() for s in led.steps], "compilations": led.compilations, "cache_hits": led.hits,
           "graphs": len(book.costs), "unpriced": led.unpriced, "estimates": led.estimates, "error": error}
    with open(os.path.join(cfg["out"], "rank0.json"), "w") as f:
        json.dump(out, f)
    return code


def run(script: str, args: list[str] = (), *, devices: int = 1, instance: str = "trn2.48xlarge",
        lnc: int | None = None, quiet_stdout: bool = False) -> dict:
    """Run the JAX `script` with `devices` simulated NeuronCores of `instance`; return the report.
    `quiet_stdout` sends the script's stdout to stderr, so that stdout carries only the launcher's JSON."""
    import subprocess
    import tempfile
    import time

    from trnsim.plan import Cluster
    from trnsim.xla.launch import RankFailedError, require
    from trnsim.xla.report import summarize

    require("jax", extra="torch")
    if not os.path.isfile(script):
        raise ConfigError(f"no such script: {script}")
    cluster = Cluster(instance, lnc=lnc)
    if not 1 <= devices <= cluster.ranks_per_node:
        raise ConfigError(f"--devices {devices}: {cluster.system.name} has {cluster.ranks_per_node} NeuronCores at "
                          f"LNC {cluster.lnc} (1 to {cluster.ranks_per_node})")
    out = tempfile.mkdtemp(prefix="trnsim-jax-")
    cfg = {"instance": cluster.system.name, "lnc": cluster.lnc, "devices": devices, "out": out, "script": script}
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                     if not f.startswith("--xla_force_host_platform_device_count"))
    env = dict(os.environ, **{ENV: json.dumps(cfg), "JAX_PLATFORMS": "cpu",
                              "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={devices}".strip()})
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trnsim.xla.jaxrun", script, *args], env=env,
                          stdout=subprocess.PIPE if quiet_stdout else None, text=True)
    if quiet_stdout and proc.stdout:
        sys.stderr.write(proc.stdout)
    path = os.path.join(out, "rank0.json")
    if not os.path.exists(path):
        raise RankFailedError(f"{script}: exited with status {proc.returncode} before any step was priced")
    with open(path) as f:
        ledger = json.load(f)
    if ledger.get("error"):
        raise RankFailedError(ledger["error"].split(": ", 1)[1])
    if proc.returncode:
        raise RankFailedError(f"{script}: exited with status {proc.returncode}")
    return summarize(ledger, cluster, world=devices, procs=devices, script=script,
                     wall_s=time.perf_counter() - start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

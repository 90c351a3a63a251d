"""Sweeps: every candidate layout on every system and cluster size, evaluated in parallel and ranked.

Work is cut into chunks of candidates; a backend maps the evaluation over the chunks: a local
process pool by default, or a Ray cluster (`ray="auto"`, `"local"` or an address) when Ray is
installed. Rows are plain dicts, so they cross process boundaries and go straight to JSON and CSV.
"""
from __future__ import annotations

import csv
import dataclasses
import multiprocessing
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from trnsim import specs
from trnsim.errors import ConfigError, TrnsimError
from trnsim.plan import workload
from trnsim.plan.layout import Cluster, Layout, Recipe, enumerate_layouts
from trnsim.plan.step import DEFAULT, Plan, with_price

RANKINGS = {"tokens": ("tokens_per_s", True), "cost": ("usd_per_million_tokens", False)}
CSV_FIELDS = ("rank", "system", "nodes", "lnc", "tp", "pp", "vpp", "dp", "cp", "ep", "micro_batch", "checkpointing",
              "step_s", "seqs_per_s", "tokens_per_s", "mfu", "memory_gib", "usd_per_million_tokens", "price_status", "valid", "rule", "reason")


@dataclass(frozen=True)
class Task:
    """One candidate, in a form that pickles (systems travel by name)."""

    model: workload.Model
    system: str
    nodes: int
    lnc: int | None
    layout: Layout
    recipe: Recipe
    price: float | None = None  # the user's USD per node-hour, else the catalog's


def row(task: Task) -> dict:
    """Evaluate one candidate: its figures, or valid=False and the reason it cannot run."""
    base = {"system": task.system, "nodes": task.nodes, **dataclasses.asdict(task.layout),
            "micro_batch": task.recipe.micro_batch, "checkpointing": task.recipe.checkpointing}
    try:
        cluster = Cluster(with_price(specs.system(task.system), task.price), task.nodes, task.lnc)
        p = DEFAULT.evaluate(task.model, cluster, task.layout, task.recipe)
    except TrnsimError as e:
        return {**base, "lnc": task.lnc, "valid": False, "reason": str(e), "rule": getattr(e, "field", type(e).__name__)}
    return {**base, **summary(p), "valid": True, "reason": "", "rule": ""}


def summary(p: Plan) -> dict:
    return {"lnc": p.cluster.lnc, "dp": p.layout.dp, "step_s": p.step_ns * 1e-9, "seqs_per_s": p.seqs_per_s,
            "tokens_per_s": p.tokens_per_s, "mfu": p.mfu, "memory_gib": sum(p.memory.values()) / 2**30,
            "usd_per_million_tokens": p.usd_per_million_tokens, "price_status": p.price_status}


def _rows(chunk: list[Task]) -> list[dict]:
    return [row(t) for t in chunk]


# --- Backends -----------------------------------------------------------------------------------


class LocalPool:
    """A process pool on this machine (`workers` 1: in this process)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1

    def imap(self, fn: Callable, chunks: list) -> Iterator:
        if self.workers == 1 or len(chunks) == 1:
            yield from map(fn, chunks)
            return
        # leaving the block terminates the workers: on Ctrl-C the sweep stops at once, not after the
        # chunks already running (a chunk of fp32 layouts can simulate for minutes)
        with multiprocessing.Pool(self.workers, initializer=_ignore_interrupts) as pool:
            yield from pool.imap(fn, chunks)


def _ignore_interrupts() -> None:
    """Workers leave Ctrl-C to the parent, which stops the sweep (one message, no worker tracebacks)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class RayCluster:
    """A Ray cluster: `"auto"` (RAY_ADDRESS or a running cluster), `"local"` (start one), or host:port.

    "local" starts a private cluster whose session lives in a fresh 0700 folder: never the cluster that the
    world-writable /tmp/ray/ray_current_cluster names, which any local user can plant (a cluster answers
    with pickles, so joining a stranger's runs their code as the user).
    """

    def __init__(self, address: str):
        try:
            import ray
        except ImportError:
            raise ConfigError("--ray needs Ray installed: pip install 'trnsim[ray]'") from None
        self.ray, self.address = ray, address

    def imap(self, fn: Callable, chunks: list) -> Iterator:
        ray = self.ray
        started, private = not ray.is_initialized(), None
        if started and self.address == "local":
            private = tempfile.mkdtemp(prefix="trnsim-ray-")
            ray.init(address="local", _temp_dir=private, include_dashboard=False, log_to_driver=False)
        elif started:
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        try:
            remote = ray.remote(fn)
            pending = [remote.remote(c) for c in chunks]
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            if started:
                ray.shutdown()
            if private:
                shutil.rmtree(private, ignore_errors=True)


def backend(workers: int | None = None, ray: str | None = None):
    return RayCluster(ray) if ray else LocalPool(workers)


# --- Sweeps -------------------------------------------------------------------------------------


def tasks(model: workload.Model, systems: Iterable[str], nodes: Iterable[int], *, lnc: int | None = None,
          micro_batches: Iterable[int] = (1,), checkpointing: Iterable[str] = ("selective",),
          prices: dict[str, float] | None = None, **recipe) -> list[Task]:
    """Every candidate: each system x cluster size x layout x micro-batch x checkpointing mode;
    `prices` overrides the catalog's USD per node-hour by system name."""
    out = []
    prices = {specs.system(k).name: v for k, v in (prices or {}).items()}
    for name in systems:
        system = specs.system(name)
        price = prices.get(system.name)
        sys_lnc = lnc if system.chip.is_neuron else None  # LNC applies to NeuronCores only
        for n in nodes:
            try:
                cluster = Cluster(system, n, sys_lnc)
            except TrnsimError:  # one row that carries the reason (a figure missing from the catalog, say)
                out.append(Task(model, system.name, n, sys_lnc, Layout(), Recipe.nxd(model, **recipe), price))
                continue
            for mb in micro_batches:
                for ck in checkpointing:
                    rec = Recipe.nxd(model, micro_batch=mb, checkpointing=ck, **recipe)
                    out += [Task(model, system.name, n, sys_lnc, lay, rec, price)
                            for lay in enumerate_layouts(model, cluster, rec)]
    return out


@dataclass
class SweepResult:
    ranked: list[dict]  # valid rows, best first
    unranked: list[dict]  # layouts that cannot run (reason), or without a price when ranked by cost
    by: str

    @property
    def best(self) -> dict | None:
        return self.ranked[0] if self.ranked else None

    def rejections(self) -> dict[str, int]:
        """How many candidates each rule stopped (a layout field, memory, price), most frequent first."""
        return dict(Counter(r["rule"] for r in self.unranked).most_common())

    def to_dict(self) -> dict:
        return {"by": self.by, "evaluated": len(self.ranked) + len(self.unranked), "valid": len(self.ranked),
                "rejected": self.rejections(), "ranked": self.ranked, "unranked": self.unranked}

    def write_csv(self, path: str) -> None:
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, CSV_FIELDS, extrasaction="ignore")
            w.writeheader()
            for i, r in enumerate(self.ranked + self.unranked, 1):
                w.writerow({**r, "rank": i if r["valid"] else ""})

    def chart(self, path: str) -> None:
        """PNG of tokens/s against $ per million tokens, one colour per system, the frontier joined."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        priced = [r for r in self.ranked if r["usd_per_million_tokens"]]
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
        for system in dict.fromkeys(r["system"] for r in priced):
            pts = [r for r in priced if r["system"] == system]
            ax.scatter([r["usd_per_million_tokens"] for r in pts], [r["tokens_per_s"] for r in pts], s=12, label=system)
        front = frontier(priced)
        ax.plot([r["usd_per_million_tokens"] for r in front], [r["tokens_per_s"] for r in front], "k-o", lw=1, mfc="none",
                label="frontier")
        unpriced = sorted({r["system"] for r in self.ranked} - {r["system"] for r in priced})
        ax.set(xlabel="USD per million tokens", ylabel="tokens/s",
               title="Layouts: throughput against cost" + (f" (no price: {', '.join(unpriced)})" if unpriced else ""))
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


def frontier(rows: list[dict]) -> list[dict]:
    """Rows no other row beats on both cost and throughput, cheapest first."""
    out, best = [], -1.0
    for r in sorted(rows, key=lambda r: (r["usd_per_million_tokens"], -r["tokens_per_s"])):
        if r["tokens_per_s"] > best:
            out.append(r)
            best = r["tokens_per_s"]
    return out


def sweep(model, systems: Iterable[str], nodes: Iterable[int], *, by: str = "tokens", workers: int | None = None,
          ray: str | None = None, chunk: int = 64, progress: Callable[[int], None] | None = None,
          candidates: list[Task] | None = None, **knobs) -> SweepResult:
    """Evaluate every candidate layout and rank the valid ones by tokens/s or by $ per token."""
    if by not in RANKINGS:
        raise ConfigError(f"sweep field 'by': must be one of {', '.join(RANKINGS)}, got {by!r}")
    m = workload.model(model)
    todo = candidates if candidates is not None else tasks(m, systems, nodes, **knobs)
    chunks = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
    rows: list[dict] = []
    for got in backend(workers, ray).imap(_rows, chunks):
        rows += got
        if progress:
            progress(len(got))
    key, descending = RANKINGS[by]
    valid = [r for r in rows if r["valid"] and (r[key] is not None)]
    valid.sort(key=lambda r: (-r[key] if descending else r[key], r["system"], r["nodes"], r["tp"], r["pp"], r["vpp"], r["cp"], r["ep"]))
    unranked = [r for r in rows if not r["valid"] or r[key] is None]
    for r in unranked:
        if r["valid"]:
            r["reason"], r["rule"] = f"no catalog price for {r['system']}", "price"
    return SweepResult(valid, unranked, by)

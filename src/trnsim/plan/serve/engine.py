"""A serving engine as vLLM on Neuron runs one, simulated request by request and step by step.

    >>> r = simulate("llama3-8b", "trn2.48xlarge", requests(50, rate=2.0, input_len=512, output_len=128, seed=0),
    ...              tp=8, max_num_seqs=4)
    >>> r.summary()["ttft_ms"]["p50"]   # doctest: +SKIP

Each replica (DP) runs its own engine: a waiting queue (first come, first served), at most `max_num_seqs`
running sequences and a pool of KV blocks (`block_tokens` each, as many as fit beside the weights). A
step is either a prefill of the waiting requests that fit (their prompts padded to one bucket) or, when
none waits, a decode step of every running sequence at the bucket of the longest context; with
`chunk` tokens of chunked prefill, a step runs the running sequences' decode and up to `chunk` prompt
tokens together. A sequence that needs a block when none is free preempts the youngest running one,
whose KV is dropped and recomputed later (vLLM's recompute preemption). Steps are priced by
trnsim.plan.serve.step, so at light load the engine's TTFT and TPOT are `plan`'s.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from trnsim import specs
from trnsim.plan.serve import step as S
from trnsim.plan.serve.model import LLM, load
from trnsim.pure import pure
from trnsim.specs import serving


@dataclass
class Request:
    id: int
    arrival: float  # ns
    input_len: int
    output_len: int
    first_token: float | None = None
    finish: float | None = None
    generated: int = 0
    prefilled: int = 0  # prompt tokens whose KV is cached (chunked prefill)
    blocks: int = 0
    ready: float | None = None  # disaggregated serving: when its KV reaches the decode pool

    @property
    def enters(self) -> float:
        """When the request reaches this engine's queue."""
        return self.arrival if self.ready is None else self.ready


def requests(n: int, rate: float, input_len, output_len, seed: int = 0) -> list[Request]:
    """`n` requests arriving as a Poisson process of `rate` per second; each length is an int or a
    (low, high) range drawn uniformly."""
    if not rate > 0:
        raise S.ServeError("rate", f"an arrival rate must be positive, got {rate!r}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1e9 / rate, n)

    def draw(spec, name):
        lo, hi = (spec, spec) if isinstance(spec, int) else spec
        if lo < 1 or hi < lo:
            raise S.ServeError(name, f"lengths must be >= 1 with low <= high, got {spec!r}")
        return rng.integers(lo, hi + 1, n)

    ins, outs = draw(input_len, "input_len"), draw(output_len, "output_len")
    return [Request(i, float(t), int(a), int(b)) for i, (t, a, b) in enumerate(zip(np.cumsum(gaps), ins, outs))]


def read_trace(path: str) -> list[Request]:
    """Requests from a CSV (header arrival_s,input_len,output_len) or JSON-lines file with those keys."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise S.ServeError("trace", f"{path}: cannot read: {e.strerror}") from None
    rows = []
    if path.endswith((".jsonl", ".json")):
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((i, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise S.ServeError("trace", f"{path}:{i}: malformed JSON: {e.msg}") from None
    else:
        rows = [(i, r) for i, r in enumerate(csv.DictReader(text.splitlines()), 2)]
    out = []
    for i, r in rows:
        try:
            arrival, a, b = float(r["arrival_s"]), int(r["input_len"]), int(r["output_len"])
        except (KeyError, TypeError, ValueError):
            raise S.ServeError("trace", f"{path}:{i}: expected arrival_s, input_len, output_len (numbers), got {r!r}") from None
        if arrival < 0 or a < 1 or b < 1:
            raise S.ServeError("trace", f"{path}:{i}: arrival_s >= 0 and lengths >= 1, got {arrival}, {a}, {b}")
        out.append(Request(len(out), arrival * 1e9, a, b))
    if not out:
        raise S.ServeError("trace", f"{path}: no requests")
    return sorted(out, key=lambda q: q.arrival)


@dataclass
class Result:
    """Finished requests and the engine's counters."""

    done: list[Request]
    steps: dict[str, int] = field(default_factory=dict)
    preemptions: int = 0
    kv_blocks: int = 0
    max_num_seqs: int = 0

    def summary(self, ttft_slo_ms: float | None = None, tpot_slo_ms: float | None = None) -> dict:
        r = self.done
        ttft = np.array([q.first_token - q.arrival for q in r]) * 1e-6
        tpot = np.array([(q.finish - q.first_token) / max(q.output_len - 1, 1) for q in r]) * 1e-6
        e2e = np.array([q.finish - q.arrival for q in r]) * 1e-6
        span = (max(q.finish for q in r) - min(q.arrival for q in r)) * 1e-9
        tokens = sum(q.output_len for q in r)
        good = np.ones(len(r), bool)
        if ttft_slo_ms:
            good &= ttft <= ttft_slo_ms
        if tpot_slo_ms:
            good &= tpot <= tpot_slo_ms
        pct = lambda a: {"mean": float(a.mean()), **{f"p{p}": float(np.percentile(a, p)) for p in (50, 90, 99)}}
        return {"requests": len(r), "duration_s": span, "ttft_ms": pct(ttft), "tpot_ms": pct(tpot), "e2e_ms": pct(e2e),
                "output_tokens_per_s": tokens / span, "requests_per_s": len(r) / span,
                "goodput_requests_per_s": float(good.sum()) / span,
                "goodput_tokens_per_s": sum(q.output_len for q, g in zip(r, good) if g) / span,
                "slo_attainment": float(good.mean()), "steps": self.steps, "preemptions": self.preemptions,
                "kv_blocks": self.kv_blocks, "max_num_seqs": self.max_num_seqs}


class Engine:
    """One replica's scheduler, KV-block pool and clock. A `prefill_only` engine hands each request on
    after its prompt (disaggregated serving); a request that arrives prefilled goes straight to decode."""

    def __init__(self, m: LLM, s: S.Setup, cluster, max_num_seqs: int, chunk: int = 0, kv_blocks: int | None = None,
                 prefill_only: bool = False):
        self.m, self.s, self.cluster = m, s, cluster
        self.max_seqs, self.chunk, self.prefill_only = max_num_seqs, chunk, prefill_only
        self.block = int(serving.defaults()["block_tokens"])
        _, per_token, room = S.kv_room(m, s, cluster)
        fit = int(room / per_token) // self.block
        self.blocks = fit if kv_blocks is None else min(kv_blocks, fit)
        need = math.ceil(s.context / self.block)
        if self.blocks < need:
            raise S.ServeError("kv_blocks", f"{self.blocks} KV blocks of {self.block} tokens cannot hold one "
                                            f"{s.context}-token sequence ({need} blocks)")
        self.compiled = S.buckets(s.context)
        self.free = self.blocks
        self.steps = {"prefill": 0, "decode": 0, "mixed": 0}
        self.preemptions = 0

    @pure()
    def _time(self, seqs: int, new: int, ctx: int, decode: bool) -> S.StepTime:
        return S.step_time(self.m, self.s, self.cluster, seqs, new, ctx, decode)

    def _bucket(self, n: int) -> int:
        return S.bucket_of(min(n, self.s.context), self.compiled)

    def _blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.block)

    def run(self, todo: list[Request], progress=None, users: int = 0) -> list[Request]:
        """Serve `todo` in arrival order; with `users` > 0, a closed loop instead: that many users each send
        their next request (the next of `todo`) the moment their last one finishes, the first ones at 0."""
        later = deque(todo[users:]) if users else deque()
        if users:
            for q in todo[:users]:
                q.arrival = 0.0
        arrivals, waiting, running, done = deque(todo[:users] if users else todo), deque(), [], []
        clock = 0.0
        while arrivals or waiting or running:
            while arrivals and arrivals[0].enters <= clock:
                waiting.append(arrivals.popleft())
            if not waiting and not running:
                clock = arrivals[0].enters
                continue
            admitted = []
            while waiting and len(running) + len(admitted) < self.max_seqs:
                q = waiting[0]
                need = self._blocks(q.input_len + 1)
                if need > self.free:
                    break
                self.free -= need
                q.blocks = need
                admitted.append(waiting.popleft())
            fresh = [q for q in admitted if q.prefilled < q.input_len]
            if fresh and not self.chunk:
                longest = self._bucket(max(q.input_len for q in fresh))
                clock += self._time(len(fresh), longest, longest, False).ns
                self.steps["prefill"] += 1
                for q in fresh:
                    q.prefilled, q.generated, q.first_token = q.input_len, 1, clock
                running += admitted
                if self.prefill_only:  # the prompts' KV leaves for the decode pool
                    for q in fresh:
                        running.remove(q)
                        self.free += q.blocks
                        q.blocks = 0
                        done.append(q)
                    continue
            else:
                running += admitted
                clock += self._step(running, clock)
            for q in [q for q in running if q.generated >= q.output_len]:
                running.remove(q)
                self.free += q.blocks
                q.finish = clock
                done.append(q)
                if later:  # its user's next request
                    nxt = later.popleft()
                    nxt.arrival = clock
                    arrivals.append(nxt)
                if progress:
                    progress(1)
            self._grow(running, waiting)
        return done

    def _step(self, running: list[Request], clock: float) -> float:
        """A decode step of the sequences past their prompt, with up to `chunk` prompt tokens of the others."""
        decoding = [q for q in running if q.prefilled >= q.input_len]
        filling = [q for q in running if q.prefilled < q.input_len]
        pieces = []  # step times of the decode and each prompt chunk; the step launches one graph for them all
        if decoding:
            ctx = self._bucket(max(q.input_len + q.generated + 1 for q in decoding))
            pieces.append(self._time(len(decoding), 1, ctx, True))
        budget = self.chunk
        finished = []
        for q in filling:
            if budget <= 0:
                break
            take = min(budget, q.input_len - q.prefilled)
            budget -= take
            pieces.append(self._time(1, self._bucket(take), self._bucket(q.prefilled + take), False))
            q.prefilled += take
            if q.prefilled >= q.input_len:
                finished.append(q)
        launches = serving.engine(self.s.engine)
        launch = launches["prefill_overhead"] if filling else launches["decode_overhead"]
        t = sum(p.ns - p.parts["overhead"] for p in pieces) + launch
        self.steps["mixed" if filling and decoding else ("prefill" if filling else "decode")] += 1
        for q in decoding:
            q.generated += 1
        for q in finished:
            q.generated, q.first_token = 1, clock + t
        return t

    def _grow(self, running: list[Request], waiting: deque) -> None:
        """Give every sequence the blocks its next token needs, preempting the youngest when none is free."""
        for q in sorted(running, key=lambda q: q.arrival):
            need = self._blocks(q.input_len + q.generated + 1) - q.blocks
            while need > self.free and len(running) > 1:
                victim = max(running, key=lambda v: v.arrival)
                if victim is q:
                    break
                running.remove(victim)
                self.free += victim.blocks
                victim.blocks, victim.prefilled, victim.generated, victim.first_token = 0, 0, 0, None
                waiting.appendleft(victim)
                self.preemptions += 1
            if need <= self.free:
                self.free -= max(need, 0)
                q.blocks += max(need, 0)


def simulate(model, system, todo: list[Request], *, max_num_seqs: int = 8, chunk: int = 0, kv_blocks: int | None = None,
             prefill_replicas: int = 0, users: int = 0, progress=None, **knobs) -> Result:
    """Serve `todo` on `system` with `dp` replicas (requests dealt round-robin); knobs as plan's Setup.

    `users` > 0 replaces the arrival times by a closed loop of that many users (a benchmark's concurrency),
    dealt over the replicas like the requests. `prefill_replicas` > 0 disaggregates: that many replicas
    only encode prompts, the other dp - P only decode, and each prompt's KV cache crosses the fabric from
    the one to the other in between."""
    m = load(model)
    if knobs.get("speculation"):
        raise S.ServeError("speculation", "trnsim serve does not simulate speculative decoding; plan serve prices it")
    longest_in, longest_out = max(q.input_len for q in todo), max(q.output_len for q in todo)
    knobs = dict(knobs, batch=max_num_seqs, input_len=longest_in, output_len=longest_out,
                 max_context=max(knobs.get("max_context") or 0, longest_in + longest_out))
    sysspec = specs.system(system) if isinstance(system, str) else system
    s = S.Setup(**knobs)
    cluster = S.validate(m, s, sysspec)
    todo = [dataclasses.replace(q) for q in todo]
    P = prefill_replicas
    if users and P:
        raise S.ServeError("users", "a closed loop of users and disaggregated prefill are not simulated together")
    if P:
        if not 0 < P < s.dp:
            raise S.ServeError("prefill_replicas", f"disaggregated serving needs prefill replicas between 1 and "
                                                   f"dp - 1 = {s.dp - 1}, got {P}")
        pool = [Engine(m, s, cluster, max_num_seqs, 0, kv_blocks, prefill_only=True) for _ in range(P)]
        for i, e in enumerate(pool):
            e.run(todo[i::P])
        first = S.replica_ranks(s) * s.cp  # rank 0 of the first decode replica
        for q in todo:
            kv = m.kv_bytes_per_token(S.KV_BYTES[s.kv_dtype], s.tp, q.input_len) * q.input_len / s.cp
            q.ready = q.first_token + S.collective_ns("send_recv", kv, (0, first * P), cluster)
        todo.sort(key=lambda q: q.ready)
    replicas = [Engine(m, s, cluster, max_num_seqs, chunk, kv_blocks) for _ in range(s.dp - P)]
    done = []
    active = replicas[:min(users, len(replicas))] if users else replicas  # a replica without users idles
    for i, e in enumerate(active):
        share = users // len(active) + (i < users % len(active)) if users else 0
        done += e.run(todo[i::len(active)], progress, share)
    engines = replicas + (pool if P else [])
    steps = {k: sum(r.steps[k] for r in engines) for k in replicas[0].steps}
    return Result(sorted(done, key=lambda q: q.id), steps, sum(r.preemptions for r in engines), replicas[0].blocks,
                  max_num_seqs)


def chart(runs: list[dict], path: str, title: str = "") -> None:
    """PNG of output tokens/s, and TTFT and TPOT percentiles, against the arrival rate of each run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = [r["rate"] for r in runs]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    a.plot(rates, [r["output_tokens_per_s"] for r in runs], "o-", label="throughput")
    a.plot(rates, [r["goodput_tokens_per_s"] for r in runs], "s--", label="goodput (within SLOs)")
    a.set(xlabel="arrivals per second", ylabel="output tokens/s", title="throughput against load")
    a.legend(fontsize=7)
    for key, style in (("ttft_ms", "o-"), ("tpot_ms", "s-")):
        for p in ("p50", "p99"):
            b.plot(rates, [r[key][p] for r in runs], style if p == "p50" else style.replace("-", ":"),
                   label=f"{key[:4].upper()} {p}")
    b.set(xlabel="arrivals per second", ylabel="ms", yscale="log", title="latency against load")
    b.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

"""Serving sweeps: every TP (and EP) degree and batch on every system, judged against TTFT and TPOT
objectives and ranked by output tokens per dollar (or per chip-second where the catalog has no price).

Rows are plain dicts (to JSON and CSV as they are); a rejected row keeps the rule it broke and why.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field

from trnsim import specs
from trnsim.errors import TrnsimError
from trnsim.plan.layout import Cluster
from trnsim.plan.serve.model import LLM, load
from trnsim.plan.serve.step import plan
from trnsim.plan.step import with_price

RANKINGS = {"dollar": "output_tokens_per_usd", "chip": "output_tokens_per_chip_s"}
CSV_FIELDS = ("rank", "system", "tp", "ep", "dp", "batch", "ttft_ms", "tpot_ms", "output_tokens_per_s",
              "output_tokens_per_chip_s", "output_tokens_per_usd", "usd_per_million_output_tokens", "price_status",
              "valid", "rule", "reason")


def candidates(m: LLM, systems, batches, max_tp: int = 64, lnc: int | None = None) -> list[tuple]:
    """(system name, tp, ep, batch) for every TP degree that divides a node's ranks (up to max_tp) and,
    for MoE models, every EP degree dividing both TP and the experts."""
    out = []
    for name in systems:
        R = Cluster(specs.system(name), 1, _lnc(name, lnc)).ranks_per_node
        for tp in (d for d in range(1, min(R, max_tp) + 1) if R % d == 0):
            eps = [e for e in range(1, tp + 1) if tp % e == 0 and m.experts % e == 0] if m.moe else [1]
            out += [(name, tp, ep, b) for ep in eps for b in batches]
    return out


def _lnc(system: str, lnc: int | None) -> int | None:
    """The asked LNC on Trainium systems; GPUs have none."""
    return lnc if specs.system(system).chip.is_neuron else None


def row(m: LLM, system: str, tp: int, ep: int, batch: int, slo: dict, prices: dict, **knobs) -> dict:
    """One candidate's figures, or valid=False with the rule it breaks (a layout rule, memory, or an SLO)."""
    base = {"system": system, "tp": tp, "ep": ep, "batch": batch}
    try:
        sysspec = with_price(specs.system(system), prices.get(system))
        p = plan(m, sysspec, tp=tp, ep=ep, dp=0, batch=batch, **knobs)
    except TrnsimError as e:
        return {**base, "valid": False, "rule": getattr(e, "field", type(e).__name__), "reason": str(e)}
    chips = p.cluster.nodes * p.cluster.system.chips
    cost = p.usd_per_million_output_tokens
    r = {**base, "dp": p.setup.dp, "ttft_ms": p.ttft_ms, "tpot_ms": p.tpot_ms, "output_tokens_per_s": p.output_tokens_per_s,
         "output_tokens_per_chip_s": p.output_tokens_per_s / chips, "usd_per_million_output_tokens": cost,
         "output_tokens_per_usd": 1e6 / cost if cost else None, "price_status": p.cluster.system.price_status,
         "memory_gib": sum(p.memory.values()) / 2**30, "valid": True, "rule": "", "reason": ""}
    for key, limit in slo.items():
        if limit and r[key] > limit:
            name = key.removesuffix("_ms").upper()
            return {**r, "valid": False, "rule": f"{key[:-3]}_slo", "reason": f"{name} {r[key]:.1f} ms exceeds the "
                                                                             f"{limit:g} ms objective"}
    return r


@dataclass
class ServeSweep:
    rows: list[dict]
    by: str = "dollar"
    ranked: list[dict] = field(init=False)
    rejected: list[dict] = field(init=False)

    def __post_init__(self):
        key = RANKINGS[self.by]
        valid = [r for r in self.rows if r["valid"]]
        # rows without a price rank after the priced ones when ranking by dollar, by tokens per chip among themselves
        self.ranked = sorted(valid, key=lambda r: (r[key] is None, -(r[key] or 0.0), -r["output_tokens_per_chip_s"]))
        for i, r in enumerate(self.ranked, 1):
            r["rank"] = i
        self.rejected = [r for r in self.rows if not r["valid"]]

    def best_per_system(self) -> dict[str, dict]:
        out = {}
        for r in self.ranked:
            out.setdefault(r["system"], r)
        return out

    def rejections(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.rejected:
            counts[r["rule"]] = counts.get(r["rule"], 0) + 1
        return counts

    def to_dict(self) -> dict:
        return {"by": self.by, "ranked": self.ranked, "rejected": self.rejected}

    def write_csv(self, path: str) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
            w.writeheader()
            w.writerows(self.ranked + self.rejected)


def sweep(model, systems, batches=(1, 2, 4, 8, 16, 32, 64), *, ttft_slo: float | None = None,
          tpot_slo: float | None = None, by: str = "dollar", max_tp: int = 64, lnc: int | None = None,
          prices: dict | None = None, progress=None, **knobs) -> ServeSweep:
    """Evaluate every candidate; `progress(n)` is called as candidates finish."""
    m = load(model)
    slo = {"ttft_ms": ttft_slo, "tpot_ms": tpot_slo}
    rows = []
    for system, tp, ep, b in candidates(m, systems, batches, max_tp, lnc):
        rows.append(row(m, system, tp, ep, b, slo, prices or {}, lnc=_lnc(system, lnc), **knobs))
        if progress:
            progress(1)
    return ServeSweep(rows, by)

"""Serving calibration: the simulated TTFT and TPOT of calibration.md section 5's rows against the published
figures, and the EAGLE3 row of the same tutorial (kept for validation, not fitted), with the time one plan takes.

    PYTHONPATH=src python benchmarks/bench_serve.py

Prints one JSON object: per row the published and simulated figures and the error in percent.
"""
from __future__ import annotations

import json
import time

from trnsim.plan.serve import Speculation, plan

ROWS = [  # (label, model, instance, knobs, published TTFT ms, published TPOT ms, fitted)
    ("trn1 TNX latency table, Llama-2-7b TP32 batch 1", "llama2-7b", "trn1.32xlarge",
     dict(tp=32, batch=1, input_len=128, output_len=8064, engine="transformers-neuronx"), 13.32, 6.70, True),
    ("trn1 TNX throughput table, Llama-2-7b TP32 batch 8", "llama2-7b", "trn1.32xlarge",
     dict(tp=32, batch=8, input_len=128, output_len=8064, engine="transformers-neuronx"), 66.40, 10.10, True),
    ("vLLM Neuron EAGLE3 tutorial baseline, Llama-3.1-8B trn2 TP8 concurrency 2", "llama3-8b", "trn2.48xlarge",
     dict(tp=8, batch=2, input_len=512, output_len=128, engine="vllm-neuron"), 51.07, 10.52, True),
    ("same tutorial with EAGLE3 (acceptance 74.1%, 5 drafted tokens: mean accepted length 3.22)", "llama3-8b",
     "trn2.48xlarge", dict(tp=8, batch=2, input_len=512, output_len=128, engine="vllm-neuron",
                           speculation=Speculation(5, 0.741)), 63.65, 6.41, False),
]


def main() -> dict:
    rows = []
    for label, model, system, knobs, ttft, tpot, fitted in ROWS:
        t = time.perf_counter()
        p = plan(model, system, **knobs)
        rows.append({"row": label, "fitted": fitted, "published_ttft_ms": ttft, "simulated_ttft_ms": round(p.ttft_ms, 2),
                     "ttft_error_pct": round(100 * (p.ttft_ms / ttft - 1), 1), "published_tpot_ms": tpot,
                     "simulated_tpot_ms": round(p.tpot_ms, 2), "tpot_error_pct": round(100 * (p.tpot_ms / tpot - 1), 1),
                     "plan_ms": round(1e3 * (time.perf_counter() - t), 1)})
    fitted = [r for r in rows if r["fitted"]]
    return {"benchmark": "serve_calibration", "rows": rows,
            "max_abs_error_pct_fitted": max(max(abs(r["ttft_error_pct"]), abs(r["tpot_error_pct"])) for r in fitted)}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))

"""Serving plans: TTFT, TPOT, throughput, KV capacity and cost of a model served on Trainium or a GPU.

    >>> from trnsim.plan import serve
    >>> p = serve.plan("llama3-8b", "trn2.48xlarge", tp=8, batch=2, input_len=512, output_len=128)

Layers: `model` (decoders from presets or Hugging Face config.json), `step` (prefill and decode priced per
op, memory, buckets, cost), `engine` (a continuous-batching serving engine, event by event) and `sweep`
(layouts and batches ranked under latency objectives).
"""
from trnsim.plan.serve.model import LLM, ServeModelError, from_hf, load
from trnsim.plan.serve.step import ServeError, ServePlan, Setup, Speculation, buckets, plan

__all__ = ["LLM", "ServeError", "ServeModelError", "ServePlan", "Setup", "Speculation", "buckets", "from_hf", "load",
           "plan"]

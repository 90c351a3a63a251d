"""Serving plans: TTFT, TPOT, throughput, KV capacity and cost of a model served on Trainium or a GPU.

Layers: `model` (decoders from presets or Hugging Face config.json).
"""
from trnsim.plan.serve.model import LLM, ServeModelError, from_hf, load

__all__ = ["LLM", "ServeModelError", "from_hf", "load"]

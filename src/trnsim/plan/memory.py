"""Memory per rank: weights, gradients, optimizer states (sharded by ZeRO-1) and activations.

Activations follow Korthikanti et al. 2022 as NxD's activation-memory guide quotes them
(reference/multichip-and-training.md 3.3), generalised to GQA, gated MLPs and MoE: per layer and
micro-batch, 10sbh in the regions outside TP (divided by t under sequence parallelism), the TP-
sharded projections and MLP, and 5as^2b/t for the attention scores. Selective recomputation drops
the s^2 term; full recomputation keeps only each layer's 2sbh input (plus one live layer).
"""
from __future__ import annotations

import math

from trnsim.specs import training
from trnsim.plan.layout import Cluster, Layout, Recipe, microbatches
from trnsim.plan.workload import Model


def layer_activation_bytes(model: Model, layout: Layout, recipe: Recipe, checkpointing: str | None = None) -> float:
    """Bytes one layer keeps for backward, per micro-batch, on one rank (16-bit activations)."""
    ckpt = checkpointing or recipe.checkpointing
    t, s, b, h = layout.tp, recipe.seq // layout.cp, recipe.micro_batch, model.hidden
    sbh = s * b * h
    outside_tp = 10 * sbh / (t if recipe.sp else 1)
    if ckpt == "full":
        return 2 * sbh / (t if recipe.sp else 1)
    hd, kv = model.head_dim, max(model.kv_heads // t, 1)
    qkv = 2 * s * b * (model.heads // t + 2 * kv) * hd
    proj_in = 2 * sbh / t
    mlp = 2 * s * b * (model.ffn // t) * model.ffn_matrices * model.top_k  # gate+up+act, or fc1+gelu
    scores = 5 * model.heads * s * recipe.seq * b / t if ckpt == "none" else 0.0
    return outside_tp + qkv + proj_in + mlp + scores


def in_flight(layout: Layout, recipe: Recipe) -> float:
    """Micro-batches whose activations the first pipeline stage holds at once (1F1B warm-up depth)."""
    if layout.pp == 1:
        return 1.0
    m = microbatches(layout, recipe)
    depth = min(layout.pp, m)
    return depth * (1 + (layout.pp - 1) / (layout.pp * layout.vpp)) if layout.vpp > 1 else depth


def memory(model: Model, cluster: Cluster, layout: Layout, recipe: Recipe) -> dict[str, float]:
    """Bytes per rank on the fullest pipeline stage: weights, gradients, optimizer, activations."""
    d = training.recipe()
    wb = recipe.dtype_bytes if recipe.dtype in ("bf16", "fp16", "fp32") else d["weight_bytes"]  # FP8/MX keep BF16 weights
    gb, ob = wb, (d["optimizer_bytes"] if recipe.dtype != "fp32" else 8)  # FP32 weights are their own master
    per_layer = model.layer_params(layout.tp, layout.ep)
    emb = math.ceil(model.vocab / layout.tp) * model.hidden
    # NxD's auto_partition splits evenly and gives the remainder to the later stages, one layer each
    layers_first, layers_last = model.layers // layout.pp, math.ceil(model.layers / layout.pp)
    if layout.pp == 1:
        params = layers_first * per_layer + emb * (1 if model.tied_embeddings else 2)
        stages = [(params, layers_first, True)]
    else:
        stages = [(layers_first * per_layer + emb, layers_first, False), (layers_last * per_layer + emb, layers_last, True)]
    act_layer = layer_activation_bytes(model, layout, recipe)
    live = layer_activation_bytes(model, layout, recipe, "none") if recipe.checkpointing == "full" else 0.0
    logits = recipe.micro_batch * recipe.seq / layout.cp * math.ceil(model.vocab / layout.tp) * 4  # FP32
    best = None
    for params, layers, last in stages:
        depth = 1.0 if (last and layout.pp > 1) else in_flight(layout, recipe)
        out = {
            "weights": params * wb,
            "gradients": params * gb,
            "optimizer": params * ob / (layout.dp if recipe.zero1 else 1),
            "activations": act_layer * layers * depth + live + (logits if last else 0.0),
        }
        if best is None or sum(out.values()) > sum(best.values()):
            best = out
    return best

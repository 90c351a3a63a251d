"""Training plans: how long and how much a model takes to train, on which systems, with which layout.

    >>> from trnsim import plan
    >>> p = plan.plan("llama3-8b", "trn1.32xlarge", nodes=32, tp=32, checkpointing="selective")
    >>> p.layout.dp
    32

Layers: `workload` (models, ops, FLOPs), `layout` (parallel layouts, placement, validation),
`memory` (bytes per rank), `compute` and `comm` (the two seams the step model times through),
`step` (step time, throughput, MFU, cost) and `sweep` (ranking every valid layout).
"""
from trnsim.plan.layout import Cluster, Layout, LayoutError, Placement, Recipe, bubble_fraction, enumerate_layouts
from trnsim.plan.step import Plan, StepModel, plan
from trnsim.plan.workload import Model, StepOp, WorkloadError, aws_flops_per_sequence, load, model, presets

Op = StepOp  # the name earlier releases exported

__all__ = ["Cluster", "Layout", "LayoutError", "Model", "Op", "StepOp", "Placement", "Plan", "Recipe", "StepModel",
           "WorkloadError", "aws_flops_per_sequence", "bubble_fraction", "enumerate_layouts", "load", "model",
           "plan", "presets"]

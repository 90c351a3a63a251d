"""JAX functions priced on a simulated NeuronCore: `trnsim.jax.cost(fn, *args, instance="trn2.48xlarge")`.

`jax.jit(fn).lower(*args)` gives the same HLO the Neuron plugin hands its compiler; trnsim.xla's
cost model prices it exactly as it prices a torch-xla graph, so the two front ends agree.
"""
from __future__ import annotations

from trnsim.xla.cost import CostModel, GraphCost


def hlo_text(fn, *args, **kwargs) -> str:
    """The HLO text of `jax.jit(fn)` lowered for these arguments (arrays or jax.ShapeDtypeStruct)."""
    from trnsim.xla.launch import require

    require("jax", extra="torch")
    import jax

    return jax.jit(fn).lower(*args, **kwargs).as_text(dialect="hlo")


def cost(fn, *args, instance: str = "trn1.32xlarge", lnc: int | None = None, world: int = 1, **kwargs) -> GraphCost:
    """Time by engine, FLOPs and memory of one call of `fn` on one NeuronCore of `instance`."""
    from trnsim.plan import Cluster

    return CostModel(Cluster(instance, lnc=lnc), world=world).cost(hlo_text(fn, *args, **kwargs))

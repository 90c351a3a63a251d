"""JAX functions priced on a simulated NeuronCore: `trnsim.jax.cost(fn, *args, instance="trn2.48xlarge")`.

`jax.jit(fn).lower(*args)` gives the same HLO the Neuron plugin hands its compiler; trnsim.xla's
cost model prices it exactly as it prices a torch-xla graph, so the two front ends agree.

Data parallelism: pass a `jax.pmap` (or `shard_map`) function with `world=` its device count. Its HLO
calls one per-device body; that body is what one NeuronCore runs, so it is what is priced, and its
`psum`/`pmean` all-reduces are timed on the instance's fabric over `world` ranks. The values come from
JAX's own devices (`XLA_FLAGS=--xla_force_host_platform_device_count=N` gives N on the host).
"""
from __future__ import annotations

from trnsim.xla.cost import CostModel, GraphCost


def hlo_text(fn, *args, **kwargs) -> str:
    """The HLO text of `jax.jit(fn)` lowered for these arguments (arrays or jax.ShapeDtypeStruct)."""
    from trnsim.xla.launch import require

    require("jax", extra="torch")
    import jax

    lowerable = fn if hasattr(fn, "lower") else jax.jit(fn)  # jit, pmap and shard_map results lower as they are
    return lowerable.lower(*args, **kwargs).as_text(dialect="hlo")


def cost(fn, *args, instance: str = "trn1.32xlarge", lnc: int | None = None, world: int = 1, **kwargs) -> GraphCost:
    """Time by engine, FLOPs and memory of one call of `fn` on one NeuronCore of `instance` (for a pmap, of
    one device's share, with its collectives over `world` ranks)."""
    from trnsim.plan import Cluster

    return CostModel(Cluster(instance, lnc=lnc), world=world).cost(hlo_text(fn, *args, **kwargs))

"""The framework path: torch-xla, the native `neuron` device and JAX, priced on a simulated NeuronCore.

    hlo       reads HLO text as torch-xla and JAX print it
    cost      the simulated compiler: an HLO graph's time by engine and its memory on one rank,
              through the planner's per-op model (trnsim.plan) and the fabric's collectives
    graphs    the compile cache and per-step accounting of a running script
    precision bf16 storage and stochastic rounding as the runtime keeps them (XLA_USE_BF16)
    neuron    the native `neuron` device (PrivateUse1): tensors with host values, eager ops priced
    neuron_compile  torch.compile(backend="neuron"): Dynamo graphs priced whole
    neuron_dist     torch.distributed backend "neuron" (values reduced across the rank processes; DDP, FSDP2,
                    DTensor)
    timeline  per-rank Perfetto timelines of the steps (`trnsim torchrun --trace`)
    jaxrun    `trnsim jax`: a JAX script on N simulated NeuronCores, each step priced
    worker    one rank of `trnsim torchrun` (the script on real torch-xla or the neuron device, in a simulated world)
    launch    `trnsim torchrun`: one worker per rank, the report gathered
    report    the summary, its table, TensorBoard scalars

See docs/pytorch.md.
"""
from trnsim.xla.cost import CostModel, DeviceOutOfMemoryError, GraphCost
from trnsim.xla.hlo import parse

__all__ = ["CostModel", "DeviceOutOfMemoryError", "GraphCost", "parse"]

"""The instruction set: importing this package registers every instruction's rules in REGISTRY."""
from trnsim.core.isa import control, dma, gpsimd, indirection, mx, scalar, stats, tensor_engine, vector  # noqa: F401
from trnsim.core.isa.opcodes import DMA, ELEMENTWISE, MATMUL, REDUCE, REGISTER, Engine, Op  # noqa: F401
from trnsim.core.isa.registry import REGISTRY, Instruction, Record  # noqa: F401

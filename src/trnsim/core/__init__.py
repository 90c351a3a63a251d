"""The NeuronCore machine: memories, the instruction set, the executor and the instruction stream.

    >>> from trnsim.core import NeuronCore, Op
    >>> nc = NeuronCore("trn2")
"""
from trnsim.core.errors import (CapacityError, DTypeError, DTypeWarning, EngineError, FreeSizeError,  # noqa: F401
                                GenerationError,
                                GridWarning, ProfileOutputWarning, ScheduleEdgeError,
                                KernelError, MemorySpaceError, OperandTypeError, OutOfBoundsError, OutOfScopeError, PartitionLimitError,
                                PartitionStartError, PSUMBankError, ShapeError, SpillWarning, UninitializedError,
                                UninitializedWarning)
from trnsim.core.isa import REGISTRY, Engine, Op, Record  # noqa: F401
from trnsim.core.machine import NeuronCore, Register, resolve_target  # noqa: F401
from trnsim.core.memory import Space  # noqa: F401
from trnsim.core.tensor import Region, View  # noqa: F401

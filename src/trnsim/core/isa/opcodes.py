"""The NeuronCore instruction set: one enum, grouped by the engine that runs each instruction by default."""
from __future__ import annotations

import enum


class _Member(enum.Enum):
    """An enum hashed by identity (members are singletons): Enum's own hash runs Python code on every
    set and dict lookup, and instructions make many."""

    __hash__ = object.__hash__


class Engine(_Member):
    """Engines of a NeuronCore, with the names NKI's `nki.isa.engine` uses."""

    TENSOR = "tensor"  # PE array: reads SBUF, writes PSUM only
    VECTOR = "vector"  # DVE
    SCALAR = "scalar"  # ACT
    GPSIMD = "gpsimd"  # POOL: SBUF only
    DMA = "dma"  # the 16 DMA engines (queues)
    SYNC = "sync"  # sequencer-only work: registers, barriers


class Op(_Member):
    # Tensor engine
    NC_MATMUL = "nc_matmul"
    NC_MATMUL_MX = "nc_matmul_mx"
    NC_TRANSPOSE = "nc_transpose"  # Tensor (PE transpose) or Vector (32x32 blocks)
    # Scalar engine
    ACTIVATION = "activation"
    ACTIVATE2 = "activate2"
    # Vector engine: elementwise
    TENSOR_TENSOR = "tensor_tensor"
    TENSOR_SCALAR = "tensor_scalar"
    SCALAR_TENSOR_TENSOR = "scalar_tensor_tensor"
    TENSOR_COPY = "tensor_copy"
    TENSOR_COPY_PREDICATED = "tensor_copy_predicated"
    RECIPROCAL = "reciprocal"
    EXPONENTIAL = "exponential"
    MEMSET = "memset"
    SELECT_REDUCE = "select_reduce"
    RANGE_SELECT = "range_select"
    # Vector engine: reductions, scans and statistics
    TENSOR_REDUCE = "tensor_reduce"
    TENSOR_SCALAR_REDUCE = "tensor_scalar_reduce"
    TENSOR_TENSOR_SCAN = "tensor_tensor_scan"
    TENSOR_SCALAR_CUMULATIVE = "tensor_scalar_cumulative"
    BN_STATS = "bn_stats"
    BN_AGGR = "bn_aggr"
    MAX8 = "max8"
    NC_FIND_INDEX8 = "nc_find_index8"
    NC_MATCH_REPLACE8 = "nc_match_replace8"
    NC_STREAM_SHUFFLE = "nc_stream_shuffle"
    QUANTIZE_MX = "quantize_mx"
    RAND = "rand"
    SET_RNG_SEED = "set_rng_seed"
    DROPOUT = "dropout"
    RAND_SET_STATE = "rand_set_state"
    RAND_GET_STATE = "rand_get_state"
    # GpSimd engine
    IOTA = "iota"
    AFFINE_SELECT = "affine_select"
    TENSOR_PARTITION_REDUCE = "tensor_partition_reduce"
    LOCAL_GATHER = "local_gather"
    NC_N_GATHER = "nc_n_gather"
    SEQUENCE_BOUNDS = "sequence_bounds"
    NONZERO_WITH_COUNT = "nonzero_with_count"
    TOPK = "topk"
    GATHER_FLATTENED = "gather_flattened"
    # Tensor Indirection (v4+): the columns of an indirect operand, moved on the engine of its instruction
    TI_GATHER = "tensor_indirection_gather"
    TI_SCATTER = "tensor_indirection_scatter"
    # DMA
    DMA_COPY = "dma_copy"
    DMA_COMPUTE = "dma_compute"
    DMA_TRANSPOSE = "dma_transpose"
    SENDRECV = "sendrecv"
    # Sequencers (Sync): registers and cross-core sync
    REGISTER_ALLOC = "register_alloc"
    REGISTER_MOVE = "register_move"
    REGISTER_LOAD = "register_load"
    REGISTER_STORE = "register_store"
    CORE_BARRIER = "core_barrier"


MATMUL = frozenset({Op.NC_MATMUL, Op.NC_MATMUL_MX})
DMA = frozenset({Op.DMA_COPY, Op.DMA_COMPUTE, Op.DMA_TRANSPOSE, Op.SENDRECV})
ELEMENTWISE = frozenset({Op.TENSOR_TENSOR, Op.TENSOR_SCALAR, Op.SCALAR_TENSOR_TENSOR, Op.TENSOR_COPY,
                         Op.RECIPROCAL, Op.ACTIVATION, Op.ACTIVATE2, Op.EXPONENTIAL, Op.DROPOUT})
REDUCE = frozenset({Op.TENSOR_REDUCE, Op.TENSOR_SCALAR_REDUCE, Op.TENSOR_PARTITION_REDUCE, Op.BN_STATS, Op.BN_AGGR})
REGISTER = frozenset({Op.REGISTER_ALLOC, Op.REGISTER_MOVE, Op.REGISTER_LOAD, Op.REGISTER_STORE})

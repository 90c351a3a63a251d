"""Every name of the NKI API reference of both generations resolves in trnsim (through the shim, as a kernel
imports it). The lists are the autosummary entries of the reference's index pages: NKI 0.6
(aws-neuron-sdk nki/api/nki*.rst) and the beta API of SDK 2.26 (general/nki/api/nki*.rst)."""
import importlib

import pytest

import trnsim.shim

CURRENT_NKI = """
    jit simulate
""".split()
CURRENT_LANGUAGE = """
    ndarray zeros ones full zeros_like empty_like shared_constant shared_identity_matrix rand random_seed
    NkiTensor load load_transpose2d store copy matmul transpose abs abs_max abs_min add arctan ceil cos exp
    floor log maximum minimum multiply negative power reciprocal rsqrt sign sin sqrt square subtract tan
    tanh trunc relu sigmoid silu silu_dx gelu gelu_dx gelu_apprx_sigmoid gelu_apprx_sigmoid_dx
    gelu_apprx_tanh mish softplus softmax erf erf_dx dropout rms_norm all max mean min prod sum var equal
    not_equal less less_equal greater greater_equal logical_and logical_or logical_xor logical_not
    bitwise_and bitwise_or bitwise_xor invert left_shift right_shift broadcast_to ds expand_dims where
    gather_flattened affine_range dynamic_range sequential_range static_range fori_loop while_loop psum sbuf
    hbm private_hbm shared_hbm is_psum is_sbuf is_hbm is_on_chip device_print no_reorder program_id
    num_programs program_ndim bool_ int8 int16 int32 uint8 uint16 uint32 float16 float32 bfloat16 tfloat32
    float8_e4m3 float8_e5m2 float8_e4m3fn float8_e8m0fnu float8_e5m2_x4 float8_e4m3fn_x4 float4_e2m1fn_x4
    tile_size prelu bypass
""".split()
CURRENT_ISA = """
    nc_matmul nc_matmul_mx nc_transpose activation activation_reduce activate2 tensor_reduce
    tensor_partition_reduce tensor_tensor tensor_tensor_scan scalar_tensor_tensor tensor_scalar
    tensor_scalar_reduce tensor_scalar_cumulative tensor_copy tensor_copy_predicated exponential reciprocal
    quantize_mx iota dropout affine_select range_select select_reduce sequence_bounds memset bn_stats
    bn_aggr local_gather nc_n_gather dma_copy dma_transpose dma_compute max8 nc_find_index8
    nc_match_replace8 nc_stream_shuffle register_alloc register_load register_move register_store
    core_barrier sendrecv rng rand2 rand_set_state rand_get_state set_rng_seed nonzero_with_count topk
    engine dma_engine reduce_cmd dge_mode oob_mode matmul_perf_mode nc_version get_nc_version
    VirtualRegister NkiInstruction
""".split()
CURRENT_COLLECTIVES = """
    all_reduce all_gather all_gather_v reduce_scatter all_to_all all_to_all_v collective_permute
    collective_permute_implicit collective_permute_implicit_reduce
    collective_permute_implicit_current_processing_rank_id rank_id ReplicaGroup
""".split()
BETA_NKI = """
    jit benchmark profile baremetal simulate_kernel tensor
""".split()
BETA_LANGUAGE = """
    load store load_transpose2d atomic_rmw copy broadcast_to ndarray empty_like zeros zeros_like ones full
    rand random_seed shared_constant shared_identity_matrix add subtract multiply divide power maximum
    minimum max min mean var sum prod all abs negative sign trunc floor ceil mod fmod exp log cos sin tan
    tanh arctan sqrt rsqrt sigmoid relu gelu gelu_dx gelu_apprx_tanh gelu_apprx_sigmoid silu silu_dx erf
    erf_dx softplus mish square softmax rms_norm dropout matmul transpose reciprocal bitwise_and bitwise_or
    bitwise_xor invert left_shift right_shift equal not_equal greater greater_equal less less_equal
    logical_and logical_or logical_xor logical_not ds arange mgrid expand_dims where gather_flattened
    all_reduce static_range affine_range sequential_range par_dim psum sbuf hbm private_hbm shared_hbm
    program_id num_programs program_ndim spmd_dim nc device_print loop_reduce tfloat32 bfloat16 float8_e4m3
    float8_e5m2 tile_size fp32
""".split()
BETA_ISA = """
    nc_matmul nc_transpose activation activation_reduce tensor_reduce tensor_partition_reduce tensor_tensor
    tensor_tensor_scan scalar_tensor_tensor tensor_scalar tensor_scalar_reduce tensor_copy
    tensor_copy_dynamic_src tensor_copy_dynamic_dst tensor_copy_predicated reciprocal iota dropout
    affine_select range_select select_reduce sequence_bounds memset bn_stats bn_aggr local_gather dma_copy
    dma_transpose max8 nc_find_index8 nc_match_replace8 nc_stream_shuffle engine reduce_cmd dge_mode
    nc_version get_nc_version
""".split()
BETA_COMPILER = """
    sbuf.alloc sbuf.mod_alloc sbuf.auto_alloc psum.alloc psum.mod_alloc psum.auto_alloc
    skip_middle_end_transformations enable_stack_allocator force_auto_alloc
""".split()

MODULES = [
    ("nki", CURRENT_NKI), ("nki.language", CURRENT_LANGUAGE), ("nki.isa", CURRENT_ISA),
    ("nki.collectives", CURRENT_COLLECTIVES), ("neuronxcc.nki", BETA_NKI), ("neuronxcc.nki.language", BETA_LANGUAGE),
    ("neuronxcc.nki.isa", BETA_ISA), ("neuronxcc.nki.compiler", BETA_COMPILER),
]


@pytest.fixture(autouse=True)
def shim():
    trnsim.shim.install()
    yield
    trnsim.shim.uninstall()


def _missing(module, names):
    mod = importlib.import_module(module)
    out = []
    for name in names:
        obj = mod
        for part in name.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            out.append(name)
    return out


@pytest.mark.parametrize("module, names", MODULES, ids=[m for m, _ in MODULES])
def test_documented_names_resolve(module, names):
    missing = _missing(module, names)
    assert not missing, f"{module} lacks {missing}"


"""Custom C++ operators on the GpSimd engine: our own operators in the guide's style, built with the host's
compiler against trnsim's Neuron tensor library, their values against numpy, the runtime's rules as named
errors, and their time from what their accessors moved."""
import pathlib
import textwrap

import ml_dtypes
import numpy as np
import pytest

from trnsim.core import customop
from trnsim.core.customop import (CustomOpBuildError, CustomOpCompileError, CustomOpPlatformError,
                                  CustomOpRuleError)
from trnsim.core.customop import build as build_mod

SRC = pathlib.Path(__file__).parent / "customop_src"
pytestmark = pytest.mark.skipif(not any(map(build_mod.shutil.which, ("g++", "c++", "clang++"))),
                                reason="custom operators need a C++ compiler (apt-get install g++)")


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    """The shared entry-point object lives in a cache folder: one per test module, not the user's."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def tops(tmp_path_factory):
    return customop.load("tops", [SRC / "ops.cpp"], [SRC / "ops_shape.cpp"], tmp_path_factory.mktemp("tops"))


@pytest.fixture(scope="module")
def tmulti(tmp_path_factory):
    return customop.load("tmulti", [SRC / "multi.cpp"], [SRC / "multi_shape.cpp"], tmp_path_factory.mktemp("tmulti"),
                         multicore=True)


@pytest.fixture(scope="module")
def trules(tmp_path_factory):
    return customop.load("trules", [SRC / "rules.cpp"], [SRC / "rules_shape.cpp"], tmp_path_factory.mktemp("trules"))


def _rng():
    return np.random.default_rng(7)


# --- values ---------------------------------------------------------------------------------------------

def test_the_library_registers_its_operators_with_their_parameters(tops):
    assert tops.namespace == "tops" and not tops.multicore and tops.cores == 1
    assert set(tops.ops) == {"negate", "add_streams", "relu_tcm", "relu_elementwise", "scale_add", "library_ops",
                             "tcm_probe", "bf16_double", "five_streams"}
    assert tops.ops["scale_add"].signature == "scale_add(Tensor, double, int64_t)"
    assert tops.ops["library_ops"].signature == "library_ops(Tensor, Scalar)"


def test_each_accessor_kind_computes_what_numpy_does(tops):
    x = _rng().standard_normal((8, 300)).astype(np.float32)
    y = _rng().standard_normal((8, 300)).astype(np.float32)
    out, _ = customop.run(tops, "negate", [x.reshape(-1)])
    np.testing.assert_array_equal(out, -x.reshape(-1))
    out, _ = customop.run(tops, "add_streams", [x, y])
    np.testing.assert_array_equal(out, x + y)
    out, _ = customop.run(tops, "relu_tcm", [x])
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    out, _ = customop.run(tops, "relu_elementwise", [x])
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_scalar_parameters_and_the_tensor_library(tops):
    x = _rng().standard_normal(50).astype(np.float32)
    out, _ = customop.run(tops, "scale_add", [x, 2.5, 3])
    np.testing.assert_allclose(out, x.astype(np.float64) * 2.5 + 3, rtol=1e-6)
    out, _ = customop.run(tops, "library_ops", [x, 0.5])
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64)) * 0.5 + np.abs(x), rtol=1e-6)


def test_bfloat16_elements_round_to_nearest_even(tops):
    x = (_rng().standard_normal(64) * 100).astype(ml_dtypes.bfloat16)
    out, _ = customop.run(tops, "bf16_double", [x])
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out.astype(np.float32), (2 * x.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32))


def test_the_tcm_pool_is_16_kib_and_tcm_malloc_returns_null_past_it(tops):
    out, _ = customop.run(tops, "tcm_probe", [np.zeros(4, np.float32)])
    # 20000 B does not fit; two 8 KiB buffers do and fill the pool, so 8 more bytes do not
    np.testing.assert_array_equal(out, [1, 1, 1])


def test_multicore_operators_run_on_every_gpsimd_core(tmulti):
    ids, calls = tmulti.run("core_ids", [np.zeros(4, np.float32)])
    np.testing.assert_array_equal(ids, [0, 1, 2, 3, 4, 5, 6, 7, 8])
    assert [c.cpu_id for c in calls] == list(range(8))
    x = _rng().standard_normal(10_000).astype(np.float32)
    out, calls = tmulti.run("relu_mc", [x])
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    shares = [c.tcm_bytes for c in calls]  # in and out of each core's share: 2 x 4 bytes an element
    assert shares[:7] == [2 * 4 * (10_000 // 8)] * 7 and sum(shares) == 2 * 4 * 10_000


# --- the runtime's rules ----------------------------------------------------------------------------------

def test_multicore_operators_may_use_only_tcm_accessors_and_get_dst_tensor(tmulti):
    x = np.ones(16, np.float32)
    with pytest.raises(CustomOpRuleError, match="only TCM accessors") as e:
        tmulti.run("uses_accessor", [x])
    assert e.value.rule == "multicore accessor"
    with pytest.raises(CustomOpRuleError, match="get_dst_tensor") as e:
        tmulti.run("returns_tensor", [x])
    assert e.value.rule == "multicore output"


@pytest.mark.parametrize("op, rule, text", [
    ("incoherent", "coherence", "write stream opened on a tensor that has another stream open"),
    ("tcm_past_end", "tcm copy range", r"elements \[6, 14\) are outside the tensor's 10 elements"),
    ("wrong_type", "accessor dtype", "asked for is Int but the tensor holds Float"),
    ("read_past_end", "stream end", "past the end of the stream: the tensor has 10 elements"),
    ("shape_reads_data", "shape function", "may not read or write tensor data"),
])
def test_each_broken_rule_is_a_named_error(trules, op, rule, text):
    with pytest.raises(CustomOpRuleError, match=text) as e:
        trules.run(op, [np.ones(10, np.float32)])
    assert e.value.rule == rule


def test_tensors_crossing_the_boundary_have_the_documented_dtypes_and_sizes(tops):
    with pytest.raises(CustomOpRuleError, match="argument 0 of negate is float64; custom operators take float32"):
        tops.run("negate", [np.ones(4)])
    with pytest.raises(CustomOpRuleError, match=r"sizes \[1, 1, 1, 1, 1, 1, 1, 1, 1\]; .* up to 8 dimensions of at "
                                                r"most 65535 or up to 4 dimensions of at most 4294967295"):
        tops.run("negate", [np.ones((1,) * 9, np.float32)])
    with pytest.raises(CustomOpRuleError, match=r"scale_add\(Tensor, double, int64_t\) takes 3 arguments; 1 given"):
        tops.run("scale_add", [np.ones(4, np.float32)])


def test_the_fifth_active_stream_runs_at_standard_accessor_speed(tops):
    xs = [np.full(100, i, np.float32) for i in range(4)]
    out, calls = tops.run("five_streams", xs)
    np.testing.assert_array_equal(out, np.full(100, 6.0))
    (c,) = calls  # four reads and the write stream: the write has no 4 KiB TCM buffer left
    assert c.stream_bytes == 4 * 4 * 100 and c.slow_stream_bytes == 4 * 100 and c.slow_stream_elements == 100


def _write(tmp: pathlib.Path, name: str, text: str) -> pathlib.Path:
    p = tmp / name
    p.write_text(textwrap.dedent(text))
    return p


SHAPE_ONE = """
    #include <torch/torch.h>
    #include "torchneuron/register.h"
    torch::Tensor s(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
    NEURON_LIBRARY(one, m) { m.def("op", &s, "k"); }
    """


def test_a_compile_error_is_the_compilers_first_error_at_the_users_line(tmp_path):
    k = _write(tmp_path, "k.cpp", """\
        #include <torch/torch.h>
        torch::Tensor k(const torch::Tensor& x) {
          return torch::sort(x);
        }
        """)
    with pytest.raises(CustomOpCompileError, match=rf"^{k}:3: error: .*sort"):
        customop.load("one", [k], [_write(tmp_path, "s.cpp", SHAPE_ONE)], tmp_path / "b")


def test_unsupported_parameter_types_fail_to_compile_with_the_rule(tmp_path):
    s = _write(tmp_path, "s.cpp", """\
        #include <vector>
        #include <torch/torch.h>
        #include "torchneuron/register.h"
        torch::Tensor s(std::vector<int64_t> v) { return torch::zeros({1}, torch::kFloat); }
        NEURON_LIBRARY(vec, m) { m.def("op", &s, "k"); }
        """)
    with pytest.raises(CustomOpCompileError, match=rf"^{s}:5: error: .*no std::vector"):
        customop.load("vec", [_write(tmp_path, "k.cpp", "")], [s], tmp_path / "b")


def test_library_level_rules(tmp_path):
    k = _write(tmp_path, "k.cpp", """\
        #include <torch/torch.h>
        torch::Tensor k(const torch::Tensor& x) { return torch::zeros(x.sizes(), torch::kFloat); }
        """)
    eleven = _write(tmp_path, "eleven.cpp", """\
        #include <torch/torch.h>
        #include "torchneuron/register.h"
        torch::Tensor s(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
        NEURON_LIBRARY(many, m) {
        """ + "".join(f'  m.def("op{i}", &s, "k");\n' for i in range(11)) + "}\n")
    with pytest.raises(CustomOpBuildError, match="registers 11 functions; a custom-op library may have at most 10"):
        customop.load("many", [k], [eleven], tmp_path / "b1")
    with pytest.raises(CustomOpBuildError, match="kernel function.* missing_k .*not defined in compute_srcs"):
        customop.load("miss", [k], [_write(tmp_path, "miss.cpp", SHAPE_ONE.replace('"k"', '"missing_k"'))],
                      tmp_path / "b2")
    with pytest.raises(CustomOpBuildError, match="'builtin' is reserved"):
        customop.load("builtin", [k], [k], tmp_path / "b3")
    with pytest.raises(CustomOpBuildError, match="largest stack a custom operator may ask for is 400000 bytes"):
        customop.load("one", [k], [k], tmp_path / "b4", extra_cflags=["-DSTACK_SIZE=500000"])
    with pytest.raises(CustomOpBuildError, match="no NEURON_LIBRARY"):
        customop.load("none", [k], [k], tmp_path / "b5")


def test_custom_operators_run_on_neuroncore_v2_only(tmp_path):
    k = _write(tmp_path, "k.cpp", "")
    for target in ("trn2", "trn3"):
        with pytest.raises(CustomOpPlatformError, match="maintenance with Neuron 2.33.*written in NKI"):
            customop.load("one", [k], [k], tmp_path, target=target)
    assert customop.spec_for("inf2").gpsimd_cores == 8


def test_without_a_compiler_the_error_says_what_to_install(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CustomOpBuildError, match="apt-get install g\\+\\+"):
        build_mod.compiler()


def test_an_unchanged_library_is_not_rebuilt(tmp_path, tops):
    lib = pathlib.Path(tops.path)
    before = lib.stat().st_mtime_ns
    again = customop.load("tops", [SRC / "ops.cpp"], [SRC / "ops_shape.cpp"], lib.parent)
    assert again.path == tops.path and lib.stat().st_mtime_ns == before


# --- time ------------------------------------------------------------------------------------------------

def test_time_follows_what_the_accessors_moved(tops, tmulti):
    """The relu of the custom-op performance tutorial, three ways. The tutorial's throughputs (8.10, 220.7 and
    269.9 iter/s, the rest of the model unchanged) put the element-wise relu at about 127x the TCM one; the
    figures are assumptions checked against that ratio, not fitted to a kernel."""
    x = _rng().standard_normal((32, 6144)).astype(np.float32)  # the tutorial's two relus at an assumed batch of 32
    _, t_elem = customop.run(tops, "relu_elementwise", [x])
    _, t_tcm = customop.run(tops, "relu_tcm", [x])
    _, t_multi = customop.run(tmulti, "relu_mc", [x])
    assert 100 < t_elem / t_tcm < 160
    assert t_tcm / t_multi > 6
    spec = customop.spec_for("trn1")
    # the TCM relu by hand: a zeros() fill, two copies per 1024 elements (in and out of TCM) and the copy of the
    # returned tensor into the output (it did not write get_dst_tensor())
    n = x.size
    streamed, copied = 4 * n + 4 * n, 8 * n
    want = (spec.call_overhead + streamed / spec.stream_bandwidth * 1e9 + 2 * (n // 1024) * spec.tcm_copy_latency
            + copied / spec.tcm_copy_bandwidth * 1e9 + spec.element_cycles * (streamed + copied) / 4 / 1.4e9 * 1e9)
    assert t_tcm == pytest.approx(want, rel=1e-9)

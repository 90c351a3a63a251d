"""Custom C++ operators through `torch_neuronx.xla_impl.custom_op` under `trnsim torchrun`: a custom relu
trained data-parallel ends with the weights of plain PyTorch, a multicore operator gives torch's values, and
the report carries the operators' GpSimd time."""
import pathlib
import shutil

import pytest

pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
if not any(map(shutil.which, ("g++", "c++", "clang++"))):
    pytest.skip("custom operators need a C++ compiler (apt-get install g++)", allow_module_level=True)

import torch  # noqa: E402

from tests.xla.reference import data_parallel  # noqa: E402
from trnsim.core.customop import CustomOpPlatformError  # noqa: E402
from trnsim.xla.launch import torchrun  # noqa: E402

SCRIPTS = pathlib.Path(__file__).parent / "scripts"


def _reference(ranks: int, steps: int) -> dict:
    """The same training in plain PyTorch on the CPU, with torch.relu and every rank's gradient averaged."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8))

    def batch(r, step):
        g = torch.Generator().manual_seed(1000 * step + r)
        return torch.randn(12, 16, generator=g), torch.randn(12, 8, generator=g)
    return data_parallel(model, torch.optim.SGD(model.parameters(), lr=0.1), batch,
                         lambda x, y: torch.nn.functional.mse_loss(model[1](torch.relu(model[0](x))), y), ranks, steps)


def test_a_custom_relu_trains_with_the_values_of_plain_pytorch(tmp_path):
    rep = torchrun(str(SCRIPTS / "customop_train.py"), [str(tmp_path / "build"), str(tmp_path)], nproc_per_node=2,
                   instance="trn1.32xlarge", progress=False)
    want = _reference(2, 3)
    for r in range(2):
        got = torch.load(tmp_path / f"rank{r}.pt")
        for k, v in want.items():
            torch.testing.assert_close(got[k], v, rtol=1e-5, atol=1e-6)
    ops = rep["custom_ops"]
    assert set(ops) == {"my_ops::relu_forward", "my_ops::relu_backward"}
    assert ops["my_ops::relu_forward"]["calls_per_step"] == 1 and ops["my_ops::relu_forward"]["time_ms_per_step"] > 0
    assert rep["breakdown_ms"]["gpsimd_custom_op"] == pytest.approx(sum(o["time_ms_per_step"] for o in ops.values()))
    assert rep["step_time_ms"] > rep["breakdown_ms"]["gpsimd_custom_op"] > 0


def test_a_multicore_operator_gives_torchs_values(tmp_path):
    rep = torchrun(str(SCRIPTS / "customop_multicore.py"), [str(tmp_path / "build"), str(tmp_path)],
                   instance="trn1.32xlarge", progress=False)
    out = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(out["y"], torch.relu(out["x"] * 2) + 1, rtol=0, atol=0)
    assert rep["custom_ops"]["mc_ops::relu_mc"]["time_ms_per_step"] > 0


def test_trn2_refuses_custom_operators_as_the_sdk_does(monkeypatch, tmp_path):
    from trnsim.nki.neuronx import custom_op

    monkeypatch.setenv("TRNSIM_XLA", '{"instance": "trn2.48xlarge"}')
    assert custom_op.target() == "trn2"
    with pytest.raises(CustomOpPlatformError, match=r"test_customop_torch.py:\d+: custom C\+\+ operators run on NeuronCore-v2"):
        custom_op.load(name="relu", compute_srcs=[SCRIPTS / "customop" / "relu.cpp"],
                       shape_srcs=[SCRIPTS / "customop" / "shape.cpp"], build_directory=tmp_path)


def test_a_model_has_one_custom_op_library(monkeypatch, tmp_path):
    from trnsim.core.customop import CustomOpBuildError
    from trnsim.nki.neuronx import custom_op

    monkeypatch.setattr(custom_op, "_loaded", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    src = SCRIPTS / "customop"
    custom_op.load(name="relu_mc", compute_srcs=[src / "relu_mc.cpp"], shape_srcs=[src / "relu_mc_shape.cpp"],
                   build_directory=tmp_path / "a", multicore=True)
    assert hasattr(torch.ops.mc_ops, "relu_mc")
    custom_op.load(name="relu_mc", compute_srcs=[src / "relu_mc.cpp"], shape_srcs=[src / "relu_mc_shape.cpp"],
                   build_directory=tmp_path / "a", multicore=True)  # the same library again: nothing new
    with pytest.raises(CustomOpBuildError, match=r"test_customop_torch.py:\d+: a model has one custom-op library; 'mc_ops'"):
        custom_op.load(name="relu", compute_srcs=[src / "relu.cpp"], shape_srcs=[src / "shape.cpp"],
                       build_directory=tmp_path / "b")

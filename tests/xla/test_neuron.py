"""The native `neuron` device: eager ops and compiled graphs priced by the HLO cost model, DDP under torchrun."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="the framework path needs pip install 'trnsim[torch]'")

from tests.xla.reference import mlp_example  # noqa: E402
from trnsim import specs  # noqa: E402
from trnsim.plan import efficiency as eff  # noqa: E402
from trnsim.xla import neuron, torchneuron  # noqa: E402
from trnsim.xla.cost import CostModel  # noqa: E402
from trnsim.xla.graphs import Ledger  # noqa: E402
from trnsim.xla.launch import torchrun  # noqa: E402

ROOT = pathlib.Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "train_neuron.py"
# Installed while the tests are collected: autograd sizes its per-device queues at its first backward pass, so
# a device added after another test's backward in the same process is one it has no queue for.
torchneuron.install()


@pytest.fixture
def ledger():
    torchneuron.install()
    neuron.METER.ledger = led = Ledger(CostModel("trn2.48xlarge"))
    yield led
    neuron.METER.ledger = None


def test_device_is_a_pytorch_device(ledger):
    x = torch.arange(6.0).reshape(2, 3).to("neuron")
    assert x.device == torch.device("neuron", 0) and str(torch.device("neuron")) == "neuron"
    assert torch.accelerator.current_accelerator().type == "neuron" and torch.accelerator.is_available()
    m = torch.nn.Linear(3, 2).to("neuron")
    assert m.weight.device.type == "neuron"
    y = (m(x) ** 2).sum()
    y.backward()
    assert m.weight.grad.device.type == "neuron"
    ref = torch.nn.Linear(3, 2)
    ref.load_state_dict({k: v.cpu() for k, v in m.state_dict().items()})
    (ref(torch.arange(6.0).reshape(2, 3)) ** 2).sum().backward()
    torch.testing.assert_close(m.weight.grad.cpu(), ref.weight.grad)


def test_eager_matmul_is_priced_by_the_kernel_timing_model(ledger):
    M, K, N = 256, 512, 1024
    a, b = torch.randn(M, K).to("neuron"), torch.randn(K, N).to("neuron")
    before = ledger.current.compute.engines["tensor"]
    c = a @ b
    core = specs.neuroncore("trn2")  # trn2.48xlarge: LNC 2, each op split over two physical cores by rows
    rate = eff.efficiency("trn2", "matmul", eff.matmul_bucket(M / 2, N, K), "fp32") * core.peak_flops("fp32") * 2
    assert ledger.current.compute.engines["tensor"] - before == pytest.approx(2 * M * N * K / rate * 1e9, rel=1e-9)
    assert ledger.current.compute.flops == 2 * M * N * K
    torch.testing.assert_close(c.cpu(), a.cpu() @ b.cpu())


def test_unknown_aten_op_is_named_not_priced(ledger):
    a = torch.randn(4, 4)
    spd = (a @ a.T + 4 * torch.eye(4)).to("neuron")
    torch.linalg.cholesky(spd)
    assert any(k.startswith("aten.linalg_cholesky") for k in ledger.unpriced)


def test_compile_recompiles_per_shape_and_reports_graph_breaks(ledger):
    from trnsim.xla.neuron_compile import graph_breaks

    def f(x):
        y = torch.tanh(x) * 2
        print(end="")  # a graph break
        return (y * y).sum()

    c = torch.compile(f, backend="neuron")
    outs = [c(torch.full((n, 3), 0.5).to("neuron")) for n in (4, 4, 6)]
    want = [n * 3 * (2 * torch.tanh(torch.tensor(0.5))) ** 2 for n in (4, 4, 6)]
    for o, w in zip(outs, want):
        torch.testing.assert_close(o.cpu(), w)
    causes = [c["cause"] for c in ledger.compilations]
    assert causes.count("first compilation (forward)") == 2  # the graphs before and after the break
    assert "new input shapes (forward): f32[4,3] -> f32[6,3]" in causes and len(causes) == 4
    here = pathlib.Path(__file__).name
    assert any(b["line"].endswith(f"{here}:{f.__code__.co_firstlineno + 2}") for b in graph_breaks())
    with pytest.raises(Exception, match="static shapes only"):
        torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)(torch.ones(3, 2).to("neuron"))


def _reference(ranks: int, steps: int, batch: int, lr: float) -> dict:
    """Plain PyTorch on the host, full batch: every rank's batch in one, one SGD-with-momentum update a step."""
    ex = mlp_example()  # train_neuron.py's model
    model = ex.make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        xs, ys = zip(*(ex.batch(r, step, batch) for r in range(ranks)))
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return model.state_dict()


def test_ddp_compiled_example_ends_with_the_full_batch_weights(tmp_path):
    rep = torchrun(str(EXAMPLE), ["--steps", "3", "--save-all", str(tmp_path)], nproc_per_node=2,
                   instance="trn2.48xlarge", progress=False, trace=str(tmp_path / "trace"))
    want = _reference(2, 3, 32, 0.05)
    for r in range(2):
        got = torch.load(tmp_path / f"rank{r}.pt")
        for k, v in want.items():
            torch.testing.assert_close(got[k], v, rtol=1e-5, atol=1e-6)
    assert rep["instance"] == "trn2.48xlarge" and rep["world"] == 2 and rep["step_time_ms"] > 0
    assert rep["breakdown_ms"]["tensor"] > 0 and rep["breakdown_ms"]["collective"] > 0 and rep["unpriced"] == {}
    assert rep["cache_hits"] == 4  # steps 2 and 3 run the forward and backward graphs from the cache
    weights = sum(v.numel() * 4 for v in want.values())
    assert rep["memory_per_core_gib"] * 2**30 >= 3 * weights  # weights, gradients, momentum at least
    assert [(c["line"].rsplit("/", 1)[-1], c["cause"]) for c in rep["compilations"]] == [
        ("train_neuron.py:31", "first compilation (forward)"), ("train_neuron.py:32", "first compilation (backward)")]
    _check_traces(rep)


def _check_traces(rep: dict) -> None:
    """Each rank's Perfetto trace: its steps end to end, each as long as its work; compilations in step 1."""
    import json

    assert len(rep["traces"]) == 2
    for r, path in enumerate(rep["traces"]):
        events = json.load(open(path))["traceEvents"]
        slices = [e for e in events if e["ph"] == "X"]
        tracks = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
        steps = [e for e in slices if tracks[e["tid"]] == "steps"]
        assert [e["name"] for e in steps] == ["step 1", "step 2", "step 3"]
        for a, b in zip(steps, steps[1:]):
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"])
        work = [e for e in slices if tracks[e["tid"]] != "steps"]
        inside = [sum(e["dur"] for e in work if s["ts"] - 1e-6 <= e["ts"] < s["ts"] + s["dur"] - 1e-6) for s in steps]
        assert inside == pytest.approx([s["dur"] for s in steps])
        compiles = [e for e in slices if tracks[e["tid"]] == "compile"]
        assert len(compiles) == 2 and all(e["ts"] < steps[0]["dur"] and e["dur"] >= 10e6 for e in compiles)  # >= 10 s
        assert any(tracks[e["tid"]] == "collective" and e["name"] == "all_reduce" for e in slices)
        if r == 0:  # the report's steps are rank 0's: compute and collectives, plus the warm-up's compile estimate
            want = [(p["time_ms"] * 1e3 + p["compile_s"] * 1e6) for p in rep["per_step"]]
            assert [s["dur"] for s in steps] == pytest.approx(want)


def test_autocast_runs_matmuls_in_bf16_and_keeps_fp32_weights(ledger):
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    m = torch.nn.Linear(8, 3).to("neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        c = a.to("neuron") @ b.to("neuron")
        out = m(a.to("neuron"))
        t = torch.tanh(c)
    assert c.dtype == out.dtype == t.dtype == torch.bfloat16
    torch.testing.assert_close(c.cpu(), a.bfloat16() @ b.bfloat16(), rtol=0, atol=0)
    out.float().sum().backward()
    assert m.weight.dtype == m.weight.grad.dtype == torch.float32


def test_fsdp2_example_ends_with_the_full_batch_weights(tmp_path):
    """FSDP2 over the `neuron` group: sharded weights gathered, gradients reduce-scattered, each on the fabric."""
    rep = torchrun(str(ROOT / "examples" / "train_fsdp.py"), ["--steps", "3", "--save-all", str(tmp_path)],
                   nproc_per_node=2, instance="trn2.48xlarge", progress=False)
    want = _reference(2, 3, 32, 0.05)
    for r in range(2):
        got = torch.load(tmp_path / f"rank{r}.pt")
        for k, v in want.items():
            torch.testing.assert_close(got[k], v, rtol=1e-5, atol=1e-6)
    assert rep["step_time_ms"] > 0 and rep["breakdown_ms"]["collective"] > 0 and rep["unpriced"] == {}
    # three units of one linear layer each: gathered for the forward and again for the backward, their
    # gradients reduce-scattered once
    assert rep["per_step"][1]["collectives"] == {"all_gather": 6, "reduce_scatter": 3}


def _mlp_step(x, w):
    return (torch.tanh(x @ w) * 2 + 1).sum()


def test_compile_time_is_a_warm_up_estimate_and_the_persistent_cache_spares_it(tmp_path):
    from trnsim.specs import training
    from trnsim.xla.graphs import CompileCache

    torchneuron.install()
    x, w = torch.randn(64, 32).to("neuron"), torch.randn(32, 16).to("neuron")
    runs = []
    for _ in range(2):  # two runs of a script, one cache directory between them
        torch._dynamo.reset()
        neuron.METER.ledger = led = Ledger(CostModel("trn2.48xlarge"), cache=CompileCache(str(tmp_path)))
        try:
            c = torch.compile(_mlp_step, backend="neuron")
            c(x, w)
            led.end_step()
            c(x, w)
            led.end_step()
        finally:
            neuron.METER.ledger = None
        runs.append(led)
    first, second = runs
    assert [c["cache"] for c in first.compilations] == ["miss"]
    entry = first.compilations[0]
    graph_s = training.compile_time(0) / 1e9
    per_ins_s = training.compile_time(1) / 1e9 - graph_s
    assert entry["compile_s"] == pytest.approx(graph_s + per_ins_s * entry["instructions"])
    assert entry["instructions"] >= 5  # parameters, the dot, tanh, scale, shift, the sum
    assert first.steps[0].compile_ns == pytest.approx(entry["compile_s"] * 1e9) and first.steps[1].compile_ns == 0
    assert first.steps[0].time_ns == pytest.approx(first.steps[1].time_ns)  # compile time stays out of the step
    assert [c["cache"] for c in second.compilations] == ["hit"] and second.steps[0].compile_ns == 0


def test_eager_debug_mode_prices_compiled_graphs_op_by_op(monkeypatch):
    torchneuron.install()
    x, w = torch.randn(64, 32).to("neuron"), torch.randn(32, 16).to("neuron")

    def step_time(fn) -> tuple:
        torch._dynamo.reset()
        neuron.METER.ledger = led = Ledger(CostModel("trn2.48xlarge"))
        neuron.METER.eager.clear()
        try:
            out = fn(x, w)
        finally:
            neuron.METER.ledger = None
        return led.current.time_ns, led.current.graphs, len(led.compilations), out

    eager = step_time(_mlp_step)
    fused = step_time(torch.compile(_mlp_step, backend="neuron"))
    monkeypatch.setenv("NEURON_USE_EAGER_DEBUG_MODE", "1")
    debug = step_time(torch.compile(_mlp_step, backend="neuron"))
    assert debug[2] == 0 and fused[2] == 1  # nothing compiled in debug mode
    assert debug[1] == eager[1] >= 5 and fused[1] == 1  # one priced op each, as eagerly
    assert debug[0] == pytest.approx(eager[0]) and debug[0] > fused[0]  # unfused: the chain's HBM trips
    torch.testing.assert_close(debug[3].cpu(), _mlp_step(x.cpu(), w.cpu()))


def test_dtensor_tensor_parallel_example_ends_with_the_full_batch_weights(tmp_path):
    """parallelize_module over the `neuron` group: column- and row-wise linears, DTensor's collectives timed."""
    rep = torchrun(str(ROOT / "examples" / "train_tp.py"), ["--steps", "3", "--save-all", str(tmp_path)],
                   nproc_per_node=2, instance="trn2.48xlarge", progress=False)
    want = _reference(2, 3, 32, 0.05)  # every rank trains on both ranks' batches: the full batch
    for r in range(2):
        got = torch.load(tmp_path / f"rank{r}.pt")
        for k, v in want.items():
            torch.testing.assert_close(got[k], v, rtol=1e-5, atol=1e-6)
    assert rep["step_time_ms"] > 0 and rep["unpriced"] == {} and rep["steps"] == 3
    # forward: the row-wise layer's partial sums all-reduced, the last layer's columns all-gathered; backward:
    # the input gradient of the first column-wise layer all-reduced
    assert rep["per_step"][1]["collectives"] == {"all_reduce": 2, "all_gather": 1}
    steady = rep["per_step"][1]["time_ms"]
    assert rep["step_time_ms"] == pytest.approx(steady, rel=0.05) and rep["per_step"][0]["time_ms"] > steady

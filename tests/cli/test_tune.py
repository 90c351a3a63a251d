"""`trnsim tune`: every configuration timed, ranked by latency, refused ones listed with their reason."""
import importlib.util
import json
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

import trnsim
from trnsim.cli import cli

# TILE_N is a keyword argument of the kernel, TILE_M a module constant: both ways a parameter can arrive.
KERNEL = textwrap.dedent('''
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    TILE_M = 128


    @nki.jit
    def mm(lhsT, rhs, TILE_N=512):
        K, M = lhsT.shape
        _, N = rhs.shape
        result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(M // TILE_M):
            for n in nl.affine_range(N // TILE_N):
                acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // 128):
                    a = nl.ndarray((128, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                    b = nl.ndarray((128, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, m * TILE_M:(m + 1) * TILE_M])
                    nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * TILE_N:(n + 1) * TILE_N])
                    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
                o = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=o, src=acc)
                nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=o)
        return result
''')
K, M, N = 256, 256, 1024
ARGS = ["--arg", f"lhsT=bf16[{K},{M}]", "--arg", f"rhs=bf16[{K},{N}]"]


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "mm.py"
    path.write_text(KERNEL)
    return path


def direct_latency(path, tile_m, tile_n):
    """The timing model's latency for one configuration, through the public timing API alone."""
    spec = importlib.util.spec_from_file_location(f"mm_{tile_m}_{tile_n}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.TILE_M = tile_m
    bf16 = trnsim.numerics.bfloat16.np
    r = trnsim.benchmark(mod.mm, np.zeros((K, M), bf16), np.zeros((K, N), bf16), TILE_N=tile_n, timing_only=True)
    return r.latency


def tune(args):
    r = CliRunner().invoke(cli, ["tune", *args, "--json", "-q"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_ranks_twelve_configurations_by_the_timing_model(kernel_file, tmp_path):
    out = tmp_path / "out"
    doc = tune([str(kernel_file), "--param", "TILE_M=32,64,128", "--param", "TILE_N=128,256,512,1024",
                *ARGS, "--out", str(out), "--workers", "2"])
    rows = doc["configurations"]
    assert len(rows) == 12
    timed = [r for r in rows if r["ok"]]
    refused = [r for r in rows if not r["ok"]]
    # TILE_N=1024 fp32 is two PSUM banks: the moving free size rule refuses it, with its numbers
    assert sorted(r["config"]["TILE_M"] for r in refused) == [32, 64, 128]
    for r in refused:
        assert r["config"]["TILE_N"] == 1024 and r["refused"] == "FreeSizeError" and "1024" in r["reason"]
    expected = {(m, n): direct_latency(kernel_file, m, n) for m in (32, 64, 128) for n in (128, 256, 512)}
    assert len(set(expected.values())) > 3  # the parameters matter, so the ranking says something
    assert [(r["config"]["TILE_M"], r["config"]["TILE_N"]) for r in timed] == sorted(expected, key=expected.get)
    for r in timed:
        assert r["latency_ns"] == pytest.approx(expected[r["config"]["TILE_M"], r["config"]["TILE_N"]], rel=1e-12)
    best = min(expected, key=expected.get)
    assert (doc["best"]["config"]["TILE_M"], doc["best"]["config"]["TILE_N"]) == best
    assert (out / "tune.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "tune.json").read_text())["best"] == doc["best"]
    assert json.loads((out / "mm.profile.json").read_text())["latency_ns"] == pytest.approx(expected[best], rel=1e-12)


def test_ray_gives_the_same_ranking(kernel_file, tmp_path, one_ray_cluster):
    import ray  # noqa: F401  (a dev extra: the test runs on the real thing)
    args = [str(kernel_file), "--param", "TILE_N=128,512", "--param", "TILE_M=64,128", *ARGS]
    pool = tune([*args, "--out", str(tmp_path / "a"), "--workers", "2"])
    on_ray = tune([*args, "--out", str(tmp_path / "b"), "--ray", "--workers", "2"])
    assert [r["config"] for r in on_ray["configurations"]] == [r["config"] for r in pool["configurations"]]
    assert [r["latency_ns"] for r in on_ray["configurations"]] == [r["latency_ns"] for r in pool["configurations"]]


def test_a_parameter_the_kernel_does_not_have_is_refused(kernel_file, tmp_path):
    r = CliRunner().invoke(cli, ["tune", str(kernel_file), "--param", "TILE_X=1,2", *ARGS, "--out", str(tmp_path)])
    assert r.exit_code != 0
    assert "TILE_X" in r.output and "TILE_N" in r.output


def test_every_configuration_refused_is_an_error_with_the_reason(kernel_file, tmp_path):
    r = CliRunner().invoke(cli, ["tune", str(kernel_file), "--param", "TILE_N=1024,2048", *ARGS,
                                 "--out", str(tmp_path), "--workers", "1"])
    assert r.exit_code != 0
    # 1024 breaks the PSUM bank rule; 2048 > N runs no iteration at all, which is no candidate either
    assert "every one of the 2 configurations" in r.output and "TILE_N=1024" in r.output and "exceeds 512" in r.output


def test_refused_reasons_keep_their_file_and_line_on_a_narrow_terminal(kernel_file, tmp_path):
    r = CliRunner(env={"COLUMNS": "60"}).invoke(cli, ["tune", str(kernel_file), "--param", "TILE_N=512,1024", *ARGS,
                                                      "--out", str(tmp_path / "t"), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "t" / "tune.json").read_text())
    (refused,) = [c for c in doc["configurations"] if not c["ok"]]
    where = f"{kernel_file}:"
    assert where in refused["reason"]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("refused TILE_N=1024"))
    assert refused["reason"] in " ".join(r.stdout.split()) and line.startswith("refused TILE_N=1024: FreeSizeError")

"""`trnsim serve`: the simulated engine against plan serve, its limits and its determinism."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.plan.serve import ServeError, plan
from trnsim.plan.serve.engine import read_trace, requests, simulate

M, SYS = "llama3-8b", "trn2.48xlarge"


def test_same_seed_same_result_other_seed_other_arrivals():
    a = simulate(M, SYS, requests(40, 8.0, (128, 1024), (16, 64), seed=3), tp=8, max_num_seqs=4).summary()
    b = simulate(M, SYS, requests(40, 8.0, (128, 1024), (16, 64), seed=3), tp=8, max_num_seqs=4).summary()
    c = simulate(M, SYS, requests(40, 8.0, (128, 1024), (16, 64), seed=4), tp=8, max_num_seqs=4).summary()
    assert a == b and a != c


def test_light_load_agrees_with_plan_serve():
    """One request at a time: each TTFT is one prefill, each TPOT the mean decode step of plan serve at batch 1."""
    p = plan(M, SYS, tp=8, batch=1, input_len=700, output_len=300)
    s = simulate(M, SYS, requests(10, 0.01, 700, 300, seed=0), tp=8, max_num_seqs=8).summary()
    assert s["ttft_ms"]["p50"] == pytest.approx(p.ttft_ms, rel=0.02)
    assert s["tpot_ms"]["p50"] == pytest.approx(p.tpot_ms, rel=0.02)


def test_throughput_rises_with_load_and_saturates_at_the_batch_limit():
    rates = (0.5, 2.0, 50.0, 200.0)
    tput = [simulate(M, SYS, requests(120, r, 256, 64, seed=1), tp=8, max_num_seqs=4).summary()["output_tokens_per_s"]
            for r in rates]
    assert tput[0] < tput[1] < tput[2]
    # saturated: every step decodes four sequences, so output tokens/s approach plan serve's at batch 4
    ceiling = plan(M, SYS, tp=8, batch=4, input_len=256, output_len=64).output_tokens_per_s
    assert tput[3] == pytest.approx(ceiling, rel=0.1)
    assert tput[3] == pytest.approx(tput[2], rel=0.05)


def test_kv_blocks_cap_the_running_sequences():
    """With KV blocks for two 320-token sequences (10 blocks of 32 each), a batch limit of 8 cannot be reached."""
    load = requests(60, 500.0, 256, 64, seed=2)
    kv = simulate(M, SYS, load, tp=8, max_num_seqs=8, kv_blocks=2 * 10 + 1).summary()["output_tokens_per_s"]
    two = plan(M, SYS, tp=8, batch=2, input_len=256, output_len=64).output_tokens_per_s
    eight = simulate(M, SYS, load, tp=8, max_num_seqs=8).summary()["output_tokens_per_s"]
    assert kv == pytest.approx(two, rel=0.15)
    assert eight > 2.5 * kv


def test_trace_file_and_errors(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("arrival_s,input_len,output_len\n0.0,100,10\n0.5,200,20\n")
    reqs = read_trace(str(p))
    assert [(q.arrival, q.input_len, q.output_len) for q in reqs] == [(0.0, 100, 10), (0.5e9, 200, 20)]
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,input_len,output_len\n0.0,x,10\n")
    with pytest.raises(ServeError, match="bad.csv:2"):
        read_trace(str(bad))
    with pytest.raises(ServeError, match="kv_blocks"):
        simulate(M, SYS, reqs, tp=8, kv_blocks=2)


def test_serve_cli_json_and_goodput():
    r = CliRunner().invoke(cli, ["serve", M, "--tp", "8", "--rate", "4", "--requests", "30", "--input-len", "128:512",
                                 "--output-len", "32", "--ttft-slo", "100", "--tpot-slo", "50", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["requests"] == 30 and d["ttft_ms"]["p50"] <= d["ttft_ms"]["p90"] <= d["ttft_ms"]["p99"]
    assert d["goodput_requests_per_s"] == pytest.approx(d["slo_attainment"] * d["requests_per_s"])
    r = CliRunner().invoke(cli, ["serve", M, "--input-len", "12:4"])
    assert r.exit_code == 2 and "input_len" in r.output and "Traceback" not in r.output


def test_serve_cli_runs_several_rates_and_charts_them(tmp_path):
    png = tmp_path / "load.png"
    r = CliRunner().invoke(cli, ["serve", M, "--tp", "8", "--rate", "0.5,50", "--requests", "30", "--input-len", "256",
                                 "--output-len", "32", "--chart", str(png), "--json"])
    assert r.exit_code == 0, r.output
    runs = json.loads(r.output)["runs"]
    assert [x["rate"] for x in runs] == [0.5, 50.0]
    assert runs[1]["output_tokens_per_s"] > runs[0]["output_tokens_per_s"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = CliRunner().invoke(cli, ["serve", M, "--rate", "2", "--chart", str(png)])
    assert r.exit_code == 2 and "several --rate values" in r.output


def test_chunked_prefill_spreads_a_prompt_over_steps_beside_the_decodes():
    """One request alone: a 1000-token prompt in 256-token chunks takes four steps, each one launch."""
    from trnsim import specs
    from trnsim.plan.serve import step as S
    from trnsim.specs import serving

    r = simulate(M, SYS, requests(1, 1.0, 1000, 2, seed=0), tp=8, max_num_seqs=2, chunk=256)
    q = r.done[0]
    s = S.Setup(tp=8, batch=2, input_len=1000, output_len=2, max_context=1002)
    cluster = S.validate(S.load(M), s, specs.system(SYS))
    chunks = [S.step_time(S.load(M), s, cluster, 1, S.bucket_of(n, S.buckets(1002)), S.bucket_of(done, S.buckets(1002)), False)
              for n, done in ((256, 256), (256, 512), (256, 768), (232, 1000))]
    launch = serving.engine("vllm-neuron")["prefill_overhead"]
    expected = sum(c.ns - c.parts["overhead"] + launch for c in chunks)
    assert r.steps["prefill"] == 4
    assert q.first_token - q.arrival == pytest.approx(expected)


def test_disaggregated_prefill_hands_the_kv_cache_over_the_fabric():
    """One request, one prefill and one decode replica: its end-to-end time is the prefill, the KV transfer
    of its prompt between the replicas' chips, then its decode steps."""
    from trnsim import specs
    from trnsim.plan.layout import Cluster
    from trnsim.plan.serve.step import collective_ns

    one = requests(1, 1.0, 1000, 20, seed=0)
    split = simulate(M, SYS, one, tp=8, dp=2, max_num_seqs=4, prefill_replicas=1).done[0]
    joint = simulate(M, SYS, one, tp=8, dp=1, max_num_seqs=4).done[0]
    kv = 1000 * 32 * 2 * 1 * 128 * 2  # the prompt's K and V on one rank: 32 layers, one KV head of 128, bf16
    hop = collective_ns("send_recv", kv, (0, 8), Cluster(specs.system(SYS), 1, 2))
    assert hop > 0
    assert split.first_token == pytest.approx(joint.first_token)
    assert split.finish - joint.finish == pytest.approx(hop)
    with pytest.raises(ServeError, match="prefill_replicas"):
        simulate(M, SYS, one, tp=8, dp=2, prefill_replicas=2)


def test_a_closed_loop_of_users_runs_as_plan_serve_batches():
    """Two users on max 2 sequences, as the vLLM tutorial's benchmark runs: every step holds both, so TTFT and
    TPOT are plan serve's at batch 2, and the output rate is two requests' tokens per request time."""
    p = plan(M, SYS, tp=8, batch=2, input_len=512, output_len=128)
    todo = requests(10, 1.0, 512, 128, seed=0)
    s = simulate(M, SYS, todo, tp=8, max_num_seqs=2, users=2).summary()
    assert s["requests"] == 10
    assert s["ttft_ms"]["p50"] == pytest.approx(p.ttft_ms, rel=0.02)
    assert s["tpot_ms"]["p50"] == pytest.approx(p.tpot_ms, rel=0.02)
    assert s["output_tokens_per_s"] == pytest.approx(2 * 128 / (p.request_ns * 1e-9), rel=0.02)
    # one user over two replicas: the other idles, and every request is still served
    assert simulate(M, SYS, todo, tp=8, dp=2, users=1).summary()["requests"] == 10

"""Layouts: NxD rank placement, validation with reasons, ZeRO-1 and activation memory."""
import numpy as np
import pytest

from trnsim.fabric.cluster import ClusterError
from trnsim.plan import Cluster, Layout, LayoutError, Placement, Recipe, model, plan
from trnsim.plan.layout import validate
from trnsim.plan.memory import layer_activation_bytes, memory


def _grid(world, pp, dp, cp, tp):
    """Ranks reshaped row-major to [PP, DP, CP, TP], as NxD's initialize_model_parallel does."""
    return np.arange(world).reshape(pp, dp, cp, tp)


def test_placement_matches_the_nxd_rank_grid():
    """Every group of every dimension holds the ranks the [PP, DP, CP, TP] grid puts together."""
    cluster = Cluster("trn1.32xlarge", 8)
    lay = Layout(tp=8, pp=4, cp=2, dp=4)
    place = Placement(cluster, lay)
    g = _grid(256, 4, 4, 2, 8)
    for rank in (0, 37, 200, 255):
        p_, d_, c_, t_ = np.argwhere(g == rank)[0]
        assert place.members("tp", rank) == list(g[p_, d_, c_, :])
        assert place.members("cp", rank) == list(g[p_, d_, :, t_])
        assert place.members("dp", rank) == list(g[p_, :, c_, t_])
        assert place.members("pp", rank) == list(g[:, d_, c_, t_])
        assert place.coords(rank) == {"pp": p_, "dp": d_, "cp": c_, "tp": t_}


def test_groups_on_trn1_llama_layouts():
    """TP32 fills one trn1 (16 chips, 2 ranks each); in TP32 PP8 DP4 adjacent stages are 4 nodes apart."""
    cluster = Cluster("trn1.32xlarge", 32)
    place = Placement(cluster, Layout(tp=32, dp=32))
    tp, dp = place.group("tp"), place.group("dp")
    assert (tp.size, tp.nodes, tp.chips_per_node, tp.per_chip) == (32, 1, 16, 2)
    assert (dp.size, dp.nodes, dp.per_node) == (32, 32, 1)
    pp = Placement(cluster, Layout(tp=32, pp=8, dp=4)).group("pp")
    assert pp.stride == 128 and pp.nodes == 8


def test_trn2_lnc_sets_ranks_per_node():
    """A trn2.48xlarge runs 64 ranks at LNC 2 and 128 at LNC 1; Trn1 refuses LNC 2, naming the field."""
    assert Cluster("trn2.48xlarge").ranks == 64
    assert Cluster("trn2.48xlarge", 2, lnc=1).ranks == 256
    with pytest.raises(ClusterError, match="'lnc'.*allows LNC 1, got 2"):
        Cluster("trn1.32xlarge", lnc=2)


@pytest.mark.parametrize("kw, field, text", [
    (dict(tp=3), "tp", "heads 32 are not divisible by tp 3"),
    (dict(tp=1, pp=3), "pp", "pp 3 does not divide the 64 ranks"),
    (dict(tp=8, cp=3), "cp", "seq 8192 is not divisible by cp 3"),
    (dict(tp=1, pp=64), "pp", "64 stages for 32 layers"),
    (dict(tp=8, pp=4, vpp=3), "vpp", "divisible by pp x vpp = 12"),
    (dict(tp=8, ep=2), "ep", "llama3-8b is dense \\(no experts\\): ep must be 1, got 2"),
    (dict(tp=8, dp=4), "dp", "= 32, but 2 x trn1.32xlarge"),
])
def test_invalid_layouts_name_field_and_rule(kw, field, text):
    """Each broken rule raises LayoutError naming the field with the numbers."""
    m = model("llama3-8b")
    with pytest.raises(LayoutError, match=text) as e:
        validate(m, Cluster("trn1.32xlarge", 2), Layout(**kw), Recipe.nxd(m))
    assert e.value.field == field


def test_global_batch_must_split_over_dp():
    """A global batch that does not split into micro-batches over DP is refused with its numbers."""
    m = model("llama3-8b")
    with pytest.raises(LayoutError, match="global batch 1000 is not divisible by micro-batch 1 x dp 64"):
        validate(m, Cluster("trn1.32xlarge", 2), Layout(tp=1), Recipe.nxd(m, global_batch=1000))


def test_memory_that_does_not_fit_is_refused():
    """Llama-3-70B at TP8 on trn1 needs more HBM per rank than 16 GiB: the error names memory and the parts."""
    with pytest.raises(LayoutError, match=r"'memory': .* GiB per rank exceeds the 16.0 GiB .*weights"):
        plan("llama3-70b", "trn1.32xlarge", 4, tp=8, pp=1)


def test_activation_memory_matches_korthikanti():
    """A GPT-3 layer keeps sbh(34 + 5as/h)/t with TP+SP, 34sbh/t with selective recompute, 2sbh/t with full."""
    m = model("gpt3-175b")
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    lay = Layout(tp=t, dp=1)
    rec = Recipe.nxd(m, seq=s, micro_batch=b, checkpointing="none")
    assert layer_activation_bytes(m, lay, rec) == pytest.approx(s * b * h * (34 + 5 * a * s / h) / t)
    assert layer_activation_bytes(m, lay, rec, "selective") == pytest.approx(34 * s * b * h / t)
    assert layer_activation_bytes(m, lay, rec, "full") == pytest.approx(2 * s * b * h / t)


def test_zero1_shards_optimizer_states_over_dp():
    """Optimizer bytes per rank are 12 per local parameter, divided by DP under ZeRO-1 only."""
    m = model("llama3-8b")
    c = Cluster("trn1.32xlarge", 4)
    lay = Layout(tp=32, dp=4)
    on = memory(m, c, lay, Recipe.nxd(m, zero1=True))
    off = memory(m, c, lay, Recipe.nxd(m, zero1=False))
    local = m.layers * m.layer_params(32) + 2 * m.vocab * m.hidden / 32
    assert off["optimizer"] == pytest.approx(12 * local)
    assert on["optimizer"] == pytest.approx(12 * local / 4)
    assert on["weights"] == pytest.approx(2 * local)


def test_pipeline_bubble_is_p_minus_1_over_v_m():
    """The bubble is (pp - 1) / (vpp m) of the pipelined micro-batch time, for 1F1B and interleaved."""
    for vpp in (1, 2):
        p = plan("llama3-70b", "trn2.48xlarge", 8, tp=32, pp=4, vpp=vpp)
        m = p.recipe.global_batch // (p.recipe.micro_batch * p.layout.dp)
        b = p.breakdown
        pipelined = sum(b[k] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm"))
        assert b["bubble"] / pipelined == pytest.approx(3 / (vpp * m))

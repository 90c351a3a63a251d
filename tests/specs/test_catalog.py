"""The catalog loads, converts units, resolves names and knows every figure's source."""
import dataclasses

import pytest

import trnsim.specs as specs
from trnsim.errors import ConfigError, UnknownNameError
from trnsim.specs import units


def test_units_keep_gb_and_gib_apart():
    assert units.value("820 GiB/s", "bytes/s") == 820 * 2**30
    assert units.value("2.9 TB/s", "bytes/s") == 2.9e12
    assert units.value("800 Gbps", "bytes/s") == 100e9
    assert units.value("17 B/ns", "bytes/s") == 17e9
    assert units.value("1300 ns", "ns") == 1300
    with pytest.raises(units.UnitError, match="bytes/s figure where a bytes figure"):
        units.value("1 GB/s", "bytes")


def test_core_peak_follows_from_clock_and_array():
    v2 = specs.neuroncore("trn1")
    assert v2.peak_flops("bf16") == pytest.approx(2 * 128 * 128 * 2.8e9)
    assert v2.peak_flops("fp32") == pytest.approx(2 * 128 * 128 * 2.8e9 / 4)
    assert specs.neuroncore("v3").peak_flops("fp8") == pytest.approx(2 * 2 * 128 * 128 * 2.4e9)
    assert specs.neuroncore(4).peak_flops("mxfp8") == pytest.approx(4 * 2 * 128 * 128 * 2.4e9)
    assert v2.sbuf_bytes == 128 * 192 * 1024 and v2.psum_bank_bytes == 2048


def test_every_figure_has_a_source():
    for table in (specs.catalog.neuroncores(), specs.catalog.chips(), specs.catalog.systems()):
        for rec in table.values():
            fields = [f.name for f in dataclasses.fields(rec)
                      if f.name not in ("key", "name", "sources", "notes", "vendor", "kind", "rating", "target", "alternatives")]
            cited = {k.split(".")[0] for k in rec.sources}
            missing = [f for f in fields if f not in cited and getattr(rec, f) not in (0, None, ())]
            assert not missing, f"{rec.name}: no source for {missing}"


def test_unknown_names_suggest_close_ones():
    with pytest.raises(UnknownNameError, match="did you mean trn2.48xlarge"):
        specs.instance("trn2.48xlarg")
    with pytest.raises(specs.UnsupportedDTypeError, match="no mxfp8 datapath"):
        specs.chip("Trainium2").peak_flops("mxfp8")


def test_torus_adjacency_matches_neuron_ls():
    topo = specs.instance("trn1.32xlarge").topology
    assert sorted(topo.neighbors(0)) == [1, 3, 4, 12]
    assert sorted(topo.neighbors(5)) == [1, 4, 6, 9]
    assert sorted(topo.neighbors(15)) == [3, 11, 12, 14]
    assert all(len(topo.neighbors(d)) == 4 for d in range(16))
    ultra = specs.system("Trn2 UltraServer").topology
    assert all(len(ultra.neighbors(d)) == 6 for d in range(64))
    assert {ultra.neighbors(0)[0], ultra.neighbors(0)[-1]} == {16, 48}  # the instance ring


def test_gpu_reference_instances():
    """p4d/p5 totals follow from 8 GPUs; p5 under AWS's MFU rating is the 8,000 TFLOPS of the reference."""
    p4d, p5 = specs.instance("p4d.24xlarge"), specs.instance("p5.48xlarge")
    assert p4d.peak_flops("bf16") == pytest.approx(8 * 312e12)
    assert p4d.peak_flops("tf32") == pytest.approx(8 * 156e12)
    assert p4d.hbm_bytes == 320 * 2**30 and p5.hbm_bytes == 640 * 2**30  # the ECS table's GiB
    assert p5.peak_flops("bf16", rating="aws-mfu") == pytest.approx(8000e12)
    assert p5.peak_flops("fp8") == pytest.approx(8 * 3958e12 / 2)  # dense = half the datasheet's sparse figure
    assert p5.hbm_bandwidth == pytest.approx(8 * 3.35e12)
    assert p5.chip.cores == 0 and not p5.chip.is_neuron
    with pytest.raises(specs.UnsupportedDTypeError):
        p4d.peak_flops("fp8")


def test_nvswitch_topology_connects_every_gpu():
    """One NVSwitch node, eight GPUs, each one switch away from the seven others at its NVLink bandwidth."""
    topo = specs.instance("p4d.24xlarge").topology
    assert topo.kind == "nvswitch" and topo.switches == ("nvswitch",) and len(topo.links) == 8
    assert all(sorted(topo.connected_chips(g)) == [x for x in range(8) if x != g] for g in range(8))
    assert {ln.bandwidth for ln in topo.links} == {600e9}


def test_logical_neuroncore_config():
    """LNC 2 halves the cores the runtime shows on Trainium2/3; Trainium and GPUs refuse it with the reason."""
    assert specs.chip("Trainium2").logical_cores(2) == 4 and specs.chip("Trainium2").logical_cores(1) == 8
    assert specs.chip("Trainium3").lnc_default == 2 and specs.chip("Trainium").lnc_default == 1
    with pytest.raises(ConfigError, match="LNC applies to Trainium2 and Trainium3 only"):
        specs.chip("Trainium").logical_cores(2)
    with pytest.raises(ConfigError, match="no NeuronCores"):
        specs.chip("H100 80GB").logical_cores(1)


def test_chips_answer_like_systems():
    """A chip is a system of one: chips == 1, a one-node topology, and the same peak/HBM accessors."""
    c = specs.chip("trn3")
    assert c.chips == 1 and c.topology.chips == 1 and not c.topology.links
    assert c.peak_flops("mxfp8") == pytest.approx(2517e12) and c.hbm_bytes == 144 * 2**30


def test_top_level_api():
    """`trnsim.instance`, `trnsim.chip` and `trnsim.instances` reach the catalog."""
    import trnsim

    assert trnsim.instance("trn2.48xlarge").chips == 16
    assert trnsim.chip("Trainium2").cores == 8
    assert {"trn1.32xlarge", "p5.48xlarge"} <= {s.name for s in trnsim.instances()}


@pytest.mark.parametrize("gen, dtype, published, tol", [
    ("v2", "bf16", 92, 0.5), ("v2", "fp32", 23, 0.5),
    ("v3", "bf16", 79, 0.5), ("v3", "fp32", 20, 0.5),
    ("v3", "fp8", 158, 1.0),  # the guide doubles its rounded 79, so twice the rounding
    ("v4", "bf16", 79, 0.5), ("v4", "fp32", 20, 0.5), ("v4", "mxfp8", 315, 0.5), ("v4", "mxfp4", 315, 0.5),
])
def test_core_peaks_match_the_architecture_guides(gen, dtype, published, tol):
    """Per-core TFLOPS in the NKI architecture guides follow from 2 x 128 x 128 x MACs/cycle x clock."""
    assert abs(specs.neuroncore(gen).peak_flops(dtype) / 1e12 - published) <= tol


def test_sources_cite_public_documents_only():
    """Every source tag resolves to a public document (a doc path, a title, a URL), never to an unshipped file."""
    import tomllib
    from importlib import resources

    for f in resources.files("trnsim.specs").joinpath("data").iterdir():
        if f.name.endswith(".toml"):
            for tag, text in tomllib.loads(f.read_text()).get("sources", {}).items():
                assert "seeds/" not in text and "reference/calibration" not in text, (f.name, tag)
                assert not text.startswith("reference/") and ".md " not in text, (f.name, tag, text)


def test_human_units_are_consistent():
    """Sizes in binary units, rates in decimal GB/s (never TB/s), a whole number of GiB/s also shown as such."""
    from trnsim.specs.units import human

    assert human(96 * 2**30, "bytes") == "96 GiB" and human(24 * 2**20, "bytes") == "24 MiB"
    assert human(2.9e12, "bytes/s") == "2,900 GB/s" and human(820 * 2**30, "bytes/s") == "880.5 GB/s (820 GiB/s)"
    assert human(5e8, "bytes/s") == "500 MB/s"

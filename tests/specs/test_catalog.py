"""The catalog loads, converts units, resolves names and knows every figure's source."""
import dataclasses

import pytest

import trnsim.specs as specs
from trnsim.errors import UnknownNameError
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
            fields = [f.name for f in dataclasses.fields(rec) if f.name not in ("key", "name", "sources", "notes", "vendor", "kind", "rating", "target")]
            cited = {k.split(".")[0] for k in rec.sources}
            missing = [f for f in fields if f not in cited and getattr(rec, f) not in (0, None)]
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

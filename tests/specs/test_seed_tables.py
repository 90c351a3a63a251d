"""Every row of the spec tables in seeds 000, 001, 003 and 004, recomputed from the catalog.

The published figures are written here as the seeds print them; each is recomputed from per-chip
catalog figures (system total = chips x chip figure) and must agree within the table's rounding:
half a unit of the last printed digit.
"""
import pytest

import trnsim.specs as specs

GiB = 2**30
T, P = 1e12, 1e15


def _tolerance(text: str, factor: float = 1.0) -> float:
    digits = text.split(".")[1] if "." in text else ""
    return 0.5 * 10.0 ** -len(digits) * factor


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _flops(unit: float, rating: str | None = None, *dtypes: str):
    """Rows for a cell that covers several dtypes ('FP8/FP16/BF16/TF32'): one getter per dtype."""
    return [(d, lambda s, d=d: s.peak_flops(d, rating) / unit) for d in dtypes]


def _rows(seed, systems, column, text, getter, factor=1.0):
    return [pytest.param(name, text, getter, factor, id=f"{seed}-{name}-{column}") for name in systems]


def _table(seed, columns: dict[str, tuple[str, ...]], rows: list[tuple], factors: dict[str, float] | None = None):
    """Expand `rows` of (column label, getter or [(dtype, getter)], published figure per system column)."""
    out = []
    for label, getters, *cells in rows:
        getters = getters if isinstance(getters, list) else [("", getters)]
        for (col, systems), text in zip(columns.items(), cells):
            for dtype, g in getters:
                out += _rows(seed, systems, f"{label}{'-' + dtype if dtype else ''}", text, g, (factors or {}).get(col, 1.0))
    return out


# Seed 000, Trn1 instance table. Its TFLOPS are the launch rating (210 / 52.5 per chip) and its memory
# columns are headed GiB and GiB/sec.
SEED_000 = _table("000", {"2xl": ("trn1.2xlarge",), "32xl": ("trn1.32xlarge",)}, [
    ("devices", lambda s: s.chips, "1", "16"),
    ("vCPUs", lambda s: s.vcpus, "8", "128"),
    ("host-GiB", lambda s: s.host_memory_bytes / GiB, "32", "512"),
    ("TFLOPS", _flops(T, "launch", "fp8", "fp16", "bf16", "tf32"), "210", "3,360"),
    ("FP32-TFLOPS", _flops(T, "launch", "fp32"), "52.5", "840"),
    ("device-GiB", lambda s: s.hbm_bytes / GiB, "32", "512"),
    ("device-GiB/s", lambda s: s.hbm_bandwidth / GiB, "820", "13,120"),
    ("EFA-Gbps", lambda s: s.efa_bandwidth * 8 / 1e9, "25", "800"),
])

# Seed 001, Trn2 table: one column for trn2.48xlarge and trn2u.48xlarge, one for the UltraServer.
# The UltraServer column is the instance column times 4, rounded after (83.2 = 4 x 20.8, while
# 64 x 1,299 TFLOPS = 83.1 PF), so its tolerance is 4x the instance column's rounding.
SEED_001 = _table("001", {"inst": ("trn2.48xlarge", "trn2u.48xlarge"), "ultra": ("Trn2 UltraServer",)}, [
    ("chips", lambda s: s.chips, "16", "64"),
    ("vCPUs", lambda s: s.vcpus, "192", "768"),
    ("host-GiB", lambda s: s.host_memory_bytes / GiB, "2,048", "8,192"),
    ("FP8-PFLOPS", _flops(P, None, "fp8"), "20.8", "83.2"),
    ("PFLOPS", _flops(P, None, "fp16", "bf16", "tf32"), "10.7", "42.8"),
    ("sparse-PFLOPS", _flops(P, None, "sparse"), "41", "164"),
    ("FP32-PFLOPS", _flops(P, None, "fp32"), "2.9", "11.6"),
    ("chip-GiB", lambda s: s.hbm_bytes / GiB, "1,536", "6,144"),
    ("chip-TB/s", lambda s: s.hbm_bandwidth / T, "46.4", "185.6"),
    ("intra-NL-GB/s/chip", lambda s: s.intra_link_bandwidth / 1e9, "1,024", "1,024"),
    ("EFAv3-Gbps", lambda s: s.efa_bandwidth * 8 / 1e9 / s.servers, "3,200", "3,200"),  # per instance (the
    # UltraServer has four, 12.8 Tbps in all: systems.toml)
], factors={"ultra": 4.0})
SEED_001 += _rows("001", ("Trn2 UltraServer",), "inter-NL-GB/s/chip", "256", lambda s: s.inter_link_bandwidth / 1e9)

# Seed 003, Trn1 GA blog table. Its "GB" of accelerator and instance memory are the binary GB that
# seed 000 heads GiB (neuron-ls prints them the same way); storage is decimal (NVMe drives).
SEED_003 = _table("003", {"2xl": ("trn1.2xlarge",), "32xl": ("trn1.32xlarge",)}, [
    ("vCPUs", lambda s: s.vcpus, "8", "128"),
    ("chips", lambda s: s.chips, "1", "16"),
    ("accelerator-GB", lambda s: s.hbm_bytes / GiB, "32", "512"),
    ("instance-GB", lambda s: s.host_memory_bytes / GiB, "32", "512"),
])
SEED_003 += _rows("003", ("trn1.32xlarge",), "network-Gbps", "800", lambda s: s.efa_bandwidth * 8 / 1e9)
SEED_003 += _rows("003", ("trn1.2xlarge",), "storage-1x500GB", "500", lambda s: s.local_storage_bytes / 1e9)
SEED_003 += _rows("003", ("trn1.32xlarge",), "storage-4x2TB", "8", lambda s: s.local_storage_bytes / 1e12)

# Seed 004, Trn3 UltraServer table.
SEED_004 = _table("004", {"gen1": ("Trn3 Gen1 UltraServer",), "gen2": ("Trn3 Gen2 UltraServer",)}, [
    ("devices", lambda s: s.chips, "64", "144"),
    ("vCPUs", lambda s: s.vcpus, "768", "2304"),
    ("host-GiB", lambda s: s.host_memory_bytes / GiB, "8,192", "27,648"),
    ("TFLOPS", _flops(T, None, "mxfp8", "mxfp4"), "161,088", "362,448"),
    ("TFLOPS", _flops(T, None, "fp16", "bf16", "tf32"), "42,944", "96,624"),
    ("FP32-TFLOPS", _flops(T, None, "fp32"), "11,712", "26,352"),
    ("device-GiB", lambda s: s.hbm_bytes / GiB, "9,216", "20,736"),
    ("device-TB/s", lambda s: s.hbm_bandwidth / T, "313.6", "705.6"),
    ("NL-v4-GiB/s/device", lambda s: s.intra_link_bandwidth / GiB, "2,048", "2,048"),
    ("EFA-Gbps", lambda s: s.efa_bandwidth * 8 / 1e9, "12,800", "28,800"),
])


@pytest.mark.parametrize("system, text, getter, factor", SEED_000 + SEED_001 + SEED_003 + SEED_004)
def test_seed_table_row(system, text, getter, factor):
    """The catalog recomputes this seed-table figure within the table's rounding."""
    got = getter(specs.system(system))
    assert abs(got - _number(text)) <= _tolerance(text, factor) + 1e-9, f"{system}: {got} vs published {text}"


@pytest.mark.parametrize("name, linked", [("trn1.2xlarge", False), ("trn1.32xlarge", True)])
def test_seed_000_and_003_neuronlink_column(name, linked):
    """NeuronLink 'N/A' / 'Yes' (seed 000) and 'N/A' / 'Supported' (seed 003): links exist only on the 32xlarge."""
    s = specs.system(name)
    assert bool(s.topology.links) is linked and (s.intra_link_bandwidth > 0) is linked


@pytest.mark.parametrize("name", ["trn2.48xlarge", "trn2u.48xlarge"])
def test_seed_001_inter_instance_not_applicable(name):
    """Seed 001's 'Not applicable' inter-instance NeuronLink: one instance's graph has no instance ring."""
    assert all(ln.kind == "torus" for ln in specs.system(name).topology.links)
    assert specs.system(name).topology.shape == (4, 4)


def test_seed_000_2xlarge_efa_is_an_upper_bound_and_seed_003_disagrees():
    """Seed 000 says EFA 'up-to 25' Gbps, seed 003 'Up to 12.5'; the catalog keeps both and says which it uses."""
    s = specs.system("trn1.2xlarge")
    assert s.efa_bandwidth_is_upper_bound
    published = {round(v * 8 / 1e9, 1): src for src, v in s.published("efa_bandwidth").items()}
    assert set(published) == {25.0, 12.5}
    assert "trn1-arch.rst" in published[25.0] and "Trn1 Instances" in published[12.5]
    assert s.efa_bandwidth * 8 / 1e9 == 25.0


def test_seed_000_device_list():
    """Seed 000's Trainium list: 2 cores, 420 INT8 TOPS, 210 and 52.5 TFLOPS (launch), 32 GB, 820 GB/s, 1 TB/s DMA."""
    c = specs.chip("Trainium")
    assert c.cores == 2
    assert c.peak_flops("int8", "launch") == pytest.approx(420e12)
    for d in ("fp16", "bf16", "fp8", "tf32"):
        assert c.peak_flops(d, "launch") == pytest.approx(210e12)
    assert c.peak_flops("fp32", "launch") == pytest.approx(52.5e12)
    assert c.hbm_bytes == 32 * GiB
    assert any(v == 820e9 and "trn1-arch.rst" in src for src, v in c.published("hbm_bandwidth").items())
    assert c.dma_bandwidth == 1e12


def test_seed_prose_totals():
    """The prose totals: Trn1 'up to 3.4 petaFLOPS' (seed 003); Gen2 '362 PetaFLOPS, 706 TB/s, 20TB' (seed 004)."""
    assert round(specs.system("trn1.32xlarge").peak_flops("bf16", "launch") / P, 1) == 3.4
    gen2 = specs.system("Trn3 Gen2 UltraServer")
    assert round(gen2.peak_flops("mxfp8") / P) == 362
    assert round(gen2.hbm_bandwidth / T) == 706
    assert round(gen2.hbm_bytes / 2**40) == 20  # 20,736 GiB: the seed's "20TB" is binary

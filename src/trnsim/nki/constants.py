"""`nki.isa.constants`: the enums of nki.isa under their constants-module name."""
from trnsim.nki.isa import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: F401

"""The clock reads a contract: each instruction's cost rule says its work as typed fields (core/isa/work.py), the
compiler's decisions about it are fields of its record, and core/timing never asks which instruction it is."""
import ast
import pathlib

import pytest

import trnsim.core.timing
from trnsim.core import NeuronCore, Op
from trnsim.core.isa.registry import REGISTRY
from trnsim.core.isa.work import PE, Stream, Transfer
from trnsim.core.timing import simulate, summarize

TIMING = pathlib.Path(trnsim.core.timing.__file__).parent
OPCODE_NAMES = {op.value for op in Op} | {op.name for op in Op}


def opcode_tests(source: str) -> list[str]:
    """Where `source` asks which instruction a record is: an opcode compared or matched, a name compared with
    an opcode's, an opcode's name read, an opcode set or the Op enum imported (a REGISTRY lookup by opcode is
    not a test)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        at = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("opcodes"):
            found += [f"{at}: imports {a.name}" for a in node.names if a.name != "Engine"]
        elif isinstance(node, (ast.Compare, ast.Match)):
            subject = [node.left, *node.comparators] if isinstance(node, ast.Compare) else [node.subject]
            inside = [n for s in subject for n in ast.walk(s)]
            if any(isinstance(n, ast.Attribute) and n.attr in ("op", "opcode") for n in inside):
                found.append(f"{at}: compares an opcode")
            found += [f"{at}: compares with opcode name {n.value!r}" for n in inside
                      if isinstance(n, ast.Constant) and n.value in OPCODE_NAMES]
        elif isinstance(node, ast.Attribute) and node.attr == "value" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "op":
            found.append(f"{at}: reads an opcode's name")
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in TIMING.glob("*.py")))
def test_the_timing_model_tests_no_opcode(module):
    """rules, scheduler, result and the rest of core/timing read work fields and record fields only."""
    assert opcode_tests((TIMING / module).read_text()) == []


@pytest.mark.parametrize("snippet", ["if rec.op is Op.NC_TRANSPOSE:\n    pass",
                                     "x = e.rec.op in (A, B)",
                                     "from trnsim.core.isa.opcodes import Engine, Op",
                                     "t = e.rec.op.value",
                                     "t = kind == 'nc_matmul'",
                                     "match rec.op:\n    case _:\n        pass"])
def test_the_walk_finds_an_opcode_test(snippet):
    """The check above can fail: each form of asking for the opcode is found."""
    assert opcode_tests(snippet)


def core_with_work():
    """A shapes-only trn2 core that loads two tiles, multiplies them twice into one PSUM tile (the second adds),
    transposes on the PE array and stores by dma_transpose."""
    nc = NeuronCore("trn2", values=False)
    a, b = nc.hbm_tensor((128, 128), "bfloat16"), nc.hbm_tensor((128, 512), "bfloat16")
    st, mv = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
    nc.issue(Op.DMA_COPY, dst=st, src=a)
    nc.issue(Op.DMA_COPY, dst=mv, src=b)
    ps = nc.tensor((128, 512), "float32", "psum")
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv, accumulate=True)
    tp = nc.tensor((128, 128), "bfloat16", "psum")
    nc.issue(Op.NC_TRANSPOSE, dst=tp, data=st, engine="tensor")
    out = nc.tensor((128, 128), "bfloat16")
    nc.issue(Op.DMA_TRANSPOSE, dst=out, src=a)
    return nc


def test_cost_rules_return_typed_work():
    """Each record's cost is a Stream, PE or Transfer whose fields state the instruction's class: matmuls count
    as model FLOPs and a transpose does not; a dma_transpose says so."""
    nc = core_with_work()
    work = [REGISTRY[r.op].cost(r, nc.spec) for r in nc.stream]
    assert [type(w) for w in work] == [Transfer, Transfer, PE, PE, PE, Transfer]
    mm, tr = work[2], work[4]
    assert (mm.kind, mm.k, mm.m, mm.n, mm.model, mm.flops) == ("matmul", 128, 128, 512, True, 2.0 * 128 * 128 * 512)
    assert (tr.kind, tr.model, tr.flops) == ("transpose", False, 2.0 * 128 * 128 * 128)
    assert [w.transpose for w in work if isinstance(w, Transfer)] == [False, False, True]
    assert all(isinstance(w, Stream) for w in [REGISTRY[Op.MEMSET].cost(_memset(), nc.spec)])


def _memset():
    nc = NeuronCore("trn2", values=False)
    nc.issue(Op.MEMSET, dst=nc.tensor((128, 8), "float32"), value=0.0)
    return nc.stream[0]


def test_compiler_decisions_are_record_fields():
    """The DMA statement, the accumulation and (elsewhere) hoisting and spilling are fields, not attributes."""
    nc = core_with_work()
    dma = [r for r in nc.stream if r.engine.value == "dma"]
    assert all(r.site is not None for r in dma) and len({(r.location, r.site) for r in dma}) == 3
    assert [r.accumulated for r in nc.stream if r.op is Op.NC_MATMUL] == [False, True]
    for r in nc.stream:
        assert not {"site", "hoisted", "accumulated", "spill"} & set(r.attrs), r


def test_model_flops_leave_out_the_transpose():
    """The result counts the two matmuls as the model's FLOPs and all three PE instructions as the hardware's."""
    nc = core_with_work()
    r = summarize("k", [simulate(nc.stream, "trn2")], nc.spec)
    mm, tr = 2.0 * 128 * 128 * 512, 2.0 * 128 * 128 * 128
    assert (r.flops, r.hardware_flops) == (2 * mm, 2 * mm + tr)

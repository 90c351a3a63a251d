"""HLO text that is malformed, hostile or huge: a named HloParseError (or a price) in bounded time, never a
Python error or a loop without end."""
import subprocess
import sys

import pytest

from trnsim.xla import CostModel, hlo


def _graph(*lines: str) -> str:
    return "HloModule m\n\nENTRY %main (p: f32[8,8]) -> f32[8,8] {\n  %p = f32[8,8]{1,0} parameter(0)\n" + \
        "\n".join(f"  {line}" for line in lines) + "\n}\n"


def test_a_module_line_alone_is_no_computation():
    with pytest.raises(hlo.HloParseError, match="no HLO computation"):
        hlo.parse("HloModule")


def test_a_dimension_of_5000_digits_is_named_with_its_line():
    with pytest.raises(hlo.HloParseError, match=r"HLO line 5: a dimension of 5000 digits"):
        hlo.parse(_graph(f"ROOT %a = f32[{'9' * 5000},8]{{1,0}} add(%p, %p)"))


def test_a_long_header_line_is_read_in_linear_time():
    """A 300 KB line with no brace at its end (the old header pattern backtracked over each ")": minutes) is
    read in a fresh process well inside the time limit, which only guards against a hang."""
    line = "ENTRY %main (" + ")->" * 100_000
    code = "import sys, trnsim.xla.hlo as h\ntry:\n    h.parse(sys.stdin.read())\nexcept h.HloParseError:\n    pass"
    subprocess.run([sys.executable, "-c", code], input="HloModule m\n" + line + "\n}\n", text=True, check=True,
                   timeout=60)


@pytest.mark.parametrize("lines, rule", [
    (["%a = f32[8,8]{1,0} reshape(%b)", "%b = f32[8,8]{1,0} bitcast(%a)", "ROOT %c = f32[8,8]{1,0} add(%a, %b)"],
     "uses b before it is defined"),
    (["%a = f32[8,8]{1,0} reshape(%a)", "ROOT %c = f32[8,8]{1,0} negate(%a)"], "uses a before it is defined"),
    (["%a = f32[8,8]{1,0} negate(%p)", "%a = f32[8,8]{1,0} negate(%p)", "ROOT %c = f32[8,8]{1,0} add(%a, %a)"],
     "defined twice"),
    (["ROOT %d = f32[8,8]{1,0} dot(%p), lhs_contracting_dims={1}, rhs_contracting_dims={0}"], "needs two operands"),
    (["ROOT %d = f32[8,8]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}"],
     "needs two operands"),
    (["ROOT %d = f32[8,8]{1,0} dot(%p, %p), lhs_contracting_dims={5}, rhs_contracting_dims={0}"],
     "lhs_contracting_dims names dimension 5 of a rank-2 operand"),
    (["%t = (f32[8,8], f32[8]) tuple(%p, %p)", "ROOT %d = f32[8,8]{1,0} dot(%t, %p), lhs_contracting_dims={1}"],
     "single arrays"),
    (["ROOT %c = f32[8,8]{1,0} convolution(%p, %p), dim_labels=bf_io->bf, feature_group_count=0"],
     "feature_group_count=0"),
])
def test_malformed_graphs_are_named(lines, rule):
    with pytest.raises(hlo.HloParseError, match=rule):
        CostModel("trn1.32xlarge").cost(_graph(*lines))


def test_an_op_on_literals_only_is_priced():
    """Operands that name no instruction (literal constants) leave the op its own elements to price."""
    g = CostModel("trn1.32xlarge").cost(_graph("ROOT %c = f32[8,8]{1,0} add(1, 2)"))
    assert g.ops == 1 and g.time_ns > 0

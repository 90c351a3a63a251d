"""`--arg NAME=DTYPE[SHAPE]`: an array the device could not hold is refused, with the numbers, before the host
builds it; a dimension with thousands of digits is named."""
import pytest
from click.testing import CliRunner

from trnsim import specs
from trnsim.cli import cli
from trnsim.cli.profile import parse_arg
from trnsim.errors import ConfigError

KERNEL = '''
import nki, nki.isa as nisa, nki.language as nl

@nki.jit
def copy(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out
'''


@pytest.mark.parametrize("values", [True, False])
def test_an_argument_larger_than_hbm_is_refused_before_it_is_built(values):
    hbm = specs.neuroncore("trn2").hbm_bytes
    with pytest.raises(ConfigError, match=r"399,999,999,996 bytes \(373 GiB\) do not fit the HBM of a trn2 "
                                          r"NeuronCore"):
        parse_arg("a=bf16[99999999999,2]", values=values, target="trn2")
    rows = hbm // (2 * 1024) + 1  # one row over: still refused, by the catalog's figure
    with pytest.raises(ConfigError, match="do not fit"):
        parse_arg(f"a=bf16[{rows},1024]", values=values, target="trn2")


def test_a_dimension_of_5000_digits_is_named():
    with pytest.raises(ConfigError, match="a dimension of 5000 digits"):
        parse_arg(f"a=bf16[{'9' * 5000},2]")


def test_the_cli_says_so_without_a_traceback(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    r = CliRunner().invoke(cli, ["profile", str(f), "--arg", "a=bf16[99999999999,2]", "--timing-only",
                                 "--out", str(tmp_path / "out")])
    assert r.exit_code != 0 and "do not fit the HBM" in r.output and "internal error" not in r.output, r.output


def test_tune_checks_against_the_target_it_is_given(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    rows = specs.neuroncore("trn1").hbm_bytes // (2 * 1024) + 1
    r = CliRunner().invoke(cli, ["tune", str(f), "--arg", f"a=bf16[{rows},1024]", "--param", "X=1,2",
                                 "--target", "trn1", "--out", str(tmp_path / "out")])
    assert r.exit_code != 0 and "do not fit the HBM of a trn1 NeuronCore" in r.output, r.output

"""`trnsim check KERNEL.py`: removed and missing names, compiler refusals and never-written outputs."""
import json
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from trnsim.cli import cli

HEAD = '''
import numpy as np
import nki, nki.language as nl, nki.isa as nisa
'''


@pytest.fixture
def check(tmp_path, monkeypatch):
    """check(source, *options) -> (exit code, the JSON report, stderr) for a kernel file of that source."""
    monkeypatch.delenv("TRNSIM_NKI_VERSION", raising=False)

    def run(source, *options, head=HEAD):
        path = tmp_path / "kern.py"
        path.write_text(head + textwrap.dedent(source))
        r = CliRunner().invoke(cli, ["check", str(path), "--json", *options])
        assert "Traceback" not in r.output, r.output
        doc = json.loads(r.stdout)
        return r.exit_code, doc, str(path)
    return run


def line_of(path, text):
    return next(i for i, ln in enumerate(open(path).read().splitlines(), 1) if text in ln)


COPY = '''
@nki.jit
def copy_rows(x, rows=256):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for r in range(0, rows, 128):
        t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r:r + 128, :])
        nisa.dma_copy(dst=out[r:r + 128, :], src=t)
    return out
'''


def test_a_clean_kernel_passes_with_its_trace(check):
    code, doc, _ = check(COPY, "--arg", "x=float32[256,64]")
    assert code == 0 and doc["traced"] and doc["findings"] == [] and doc["errors"] == 0


def test_an_output_written_in_part_is_an_error_naming_its_rows(check):
    code, doc, path = check(COPY, "--arg", "x=bf16[512,64]", "--arg", "rows=384")
    assert code == 1
    (f,) = doc["findings"]
    written = np.zeros((512, 64), bool)
    written[:384] = True  # what the loop copies
    assert f["kind"] == "unwritten" and f["severity"] == "error"
    assert f"{int((~written).sum()):,} of {written.size:,} elements never written (rows 384..511)" in f["message"]
    assert f["location"] == f"{path}:{line_of(path, 'out = nl.ndarray')}"


def test_a_strided_write_leaves_the_odd_columns(check):
    code, doc, _ = check('''
        @nki.jit
        def even_columns(x):
            out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray((128, 32), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.dma_copy(dst=out[:, 0:64:2], src=t)
            return out

        def inputs():
            return (np.ones((128, 32), np.float32),)
        ''')
    written = np.zeros((128, 64), bool)
    written[:, ::2] = True
    assert code == 1
    assert f"{int((~written).sum()):,} of {written.size:,} elements" in doc["findings"][0]["message"]


def test_an_output_never_written_at_all(check):
    code, doc, _ = check('''
        @nki.jit
        def forgets(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            return out
        ''', "--arg", "x=float32[128,8]")
    assert code == 1 and "float32[128, 8]): never written" in doc["findings"][0]["message"]


def test_an_input_written_in_place_and_returned_is_no_finding(check):
    code, doc, _ = check('''
        @nki.jit
        def in_place(x):
            return x
        ''', "--arg", "x=float32[128,8]")
    assert code == 0 and doc["findings"] == []


DYNAMIC = '''
@nki.jit
def loops(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for i in nl.dynamic_range(1):
        nisa.dma_copy(dst=out, src=t)
    return out
'''


def test_dynamic_range_is_an_error_for_07_with_its_migration_page(check):
    code, doc, path = check(DYNAMIC, "--arg", "x=float32[128,8]")
    assert code == 1
    (f,) = doc["findings"]  # the source names it; the trace's warning at the same line is not said twice
    assert f["kind"] == "removed" and "nl.fori_loop" in f["message"]
    assert f["location"] == f"{path}:{line_of(path, 'dynamic_range')}"
    assert f["doc"].endswith("nki/migration/index.html#nki-migrate-0-6-to-0-7")


def test_dynamic_range_is_a_warning_for_06(check):
    code, doc, _ = check(DYNAMIC, "--arg", "x=float32[128,8]", "--nki-version", "0.6")
    assert code == 0 and [f["severity"] for f in doc["findings"]] == ["warning"] and doc["nki_version"] == "0.6"


def test_the_group_option_picks_the_version_too(check, tmp_path):
    path = tmp_path / "k06.py"
    path.write_text(HEAD + DYNAMIC)
    r = CliRunner().invoke(cli, ["--nki-version", "0.6", "check", str(path), "--arg", "x=float32[128,8]"])
    assert r.exit_code == 0 and "warning: nl.dynamic_range is deprecated" in r.output


def test_07_names_in_a_06_kernel_are_errors_with_their_api_page(check):
    code, doc, path = check('''
        @nki.jit
        def bump(v):
            t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=v)
            nisa.scalar_store(t, nisa.scalar_load(t) + 1)
            nisa.dma_copy(dst=v, src=t)
            return v
        ''', "--arg", "v=int32[1,1]", "--nki-version", "0.6")
    assert code == 1
    names = sorted(f["message"].split()[0] for f in doc["findings"])
    assert names == ["nisa.scalar_load", "nisa.scalar_store"]  # the trace's VersionError at that line: once
    assert {f["doc"] for f in doc["findings"]} == {
        "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.scalar_load.html",
        "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.scalar_store.html"}


def test_an_aliased_import_is_followed(check):
    code, doc, _ = check('''
        from nki.language import dynamic_range as dr
        @nki.jit
        def k(x):
            for i in dr(1):
                pass
            return x
        ''')
    assert code == 1 and doc["findings"][0]["message"].startswith("nl.dynamic_range was removed")
    assert not doc["traced"] and "--arg" in doc["note"]


def test_what_the_compiler_refuses_is_named_at_the_kernel_line(check):
    code, doc, path = check('''
        @nki.jit
        def too_tall(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray((256, 8), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.dma_copy(dst=out, src=t)
            return out
        ''', "--arg", "x=float32[256,8]")
    assert code == 1
    (f,) = doc["findings"]
    assert f["kind"] == "refused" and f["message"].startswith("PartitionLimitError: ") and "256" in f["message"]
    assert f["location"] == f"{path}:{line_of(path, '(256, 8)')}"
    assert not doc["traced"]


def test_a_python_error_in_the_kernel_is_an_error_at_its_line(check):
    code, doc, path = check('''
        @nki.jit
        def typo(x):
            return undefined_name
        ''', "--arg", "x=float32[128,8]")
    (f,) = doc["findings"]
    assert code == 1 and f["kind"] == "raised" and f["message"].startswith("NameError")
    assert f["location"] == f"{path}:{line_of(path, 'undefined_name')}"


def test_a_beta_kernel_gets_the_namespace_warning_and_its_outputs_checked(check):
    code, doc, path = check('''
        from neuronxcc import nki
        import neuronxcc.nki.language as nl

        @nki.jit
        def first_half(x):
            out = nl.ndarray((256, 8), x.dtype, buffer=nl.shared_hbm)
            nl.store(out[0:128, :], nl.load(x))
            return out

        def inputs():
            return (np.zeros((128, 8), np.float32),)
        ''', head="import numpy as np\n")
    assert code == 1
    kinds = sorted((f["kind"], f["severity"]) for f in doc["findings"])
    assert kinds == [("namespace", "warning"), ("unwritten", "error")]
    assert "rows 128..255" in next(f for f in doc["findings"] if f["kind"] == "unwritten")["message"]


def test_bad_options_are_one_line_errors(check, tmp_path):
    path = tmp_path / "k.py"
    path.write_text(HEAD + COPY)
    r = CliRunner().invoke(cli, ["check", str(path), "--arg", "y=float32[128,8]"])
    assert r.exit_code == 2 and "copy_rows has no argument 'y'" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["check", str(path), "--nki-version", "0.5"])
    assert r.exit_code == 2


def test_a_syntax_error_is_a_finding(check):
    code, doc, path = check("def broken(:\n    pass\n")
    assert code == 1 and doc["findings"][0]["kind"] == "syntax"
    assert doc["findings"][0]["location"] == f"{path}:{line_of(path, 'def broken')}"


def test_text_output_lists_each_finding_and_the_totals(tmp_path, monkeypatch):
    monkeypatch.delenv("TRNSIM_NKI_VERSION", raising=False)
    path = tmp_path / "k.py"
    path.write_text(HEAD + DYNAMIC)
    r = CliRunner().invoke(cli, ["check", str(path), "--arg", "x=float32[128,8]"])
    assert r.exit_code == 1
    assert f"{path}:{line_of(path, 'dynamic_range')}: error: nl.dynamic_range was removed in NKI 0.7" in r.output
    assert "1 error(s), 0 warning(s) for NKI 0.7" in r.output


EQUALITY = '''
import dataclasses


class Tiling:
    def __init__(self, rows):
        self.rows = rows


class Wide(Tiling):
    pass


class Keyed:
    def __init__(self, rows):
        self.rows = rows

    def __eq__(self, other):
        return self.rows == other.rows


@dataclasses.dataclass
class Plan:
    rows: int


@nki.jit
def copy_rows(x):
    a, b = Tiling(128), Wide(128)
    k = Keyed(128)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if a == Tiling(128):
        nisa.dma_copy(dst=out, src=t)
    if k != Keyed(128) or Plan(1) != Plan(1):
        pass
    if Wide(128) != b:
        pass
    return out
'''


def test_equality_on_a_class_without_eq_is_a_07_warning_with_the_migration_page(check):
    code, doc, path = check(EQUALITY, "--arg", "x=float32[128,8]")
    eq = [f for f in doc["findings"] if f["kind"] == "equality"]
    # the identity compare is false here, so out is never written: the trace says so too
    assert [f["location"] for f in eq] == [f"{path}:{line_of(path, 'if a == Tiling')}",
                                           f"{path}:{line_of(path, 'if Wide(128) != b')}"]
    assert "instances of Tiling, which defines no __eq__" in eq[0]["message"]
    assert "instances of Wide" in eq[1]["message"]
    assert all(f["severity"] == "warning" and f["doc"].endswith("#nki-migrate-0-6-to-0-7") for f in eq)
    assert any(f["kind"] == "unwritten" for f in doc["findings"]) and code == 1
    _, doc06, _ = check(EQUALITY, "--arg", "x=float32[128,8]", "--nki-version", "0.6")
    assert not [f for f in doc06["findings"] if f["kind"] == "equality"]
    beta = "\nfrom neuronxcc import nki\nimport neuronxcc.nki.language as nl\nimport neuronxcc.nki.isa as nisa\n"
    _, doc_beta, _ = check(EQUALITY, "--arg", "x=float32[128,8]", head=beta)  # the beta API is not traced by 0.7
    assert not [f for f in doc_beta["findings"] if f["kind"] == "equality"]


LAUNCHED = COPY + '''

if __name__ == "__main__":
    copy_rows[2](np.zeros((256, 64), np.float32))
'''


def test_the_lnc_degree_is_checked_against_the_compilers_where_that_is_set(check, monkeypatch):
    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG", raising=False)
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    code, doc, _ = check(LAUNCHED, "--arg", "x=float32[256,64]")
    assert code == 0 and doc["findings"] == []  # no compiler degree set: the kernel is compiled alone
    code, doc, path = check(LAUNCHED, "--arg", "x=float32[256,64]", "--lnc", "1")
    (f,) = doc["findings"]
    assert code == 1 and f["kind"] == "lnc" and f["location"] == f"{path}:{line_of(path, 'copy_rows[2](')}"
    assert "'copy_rows' is configured with LNC=2 (kernel[2]), but neuronx-cc is using LNC=1 (--lnc 1)" in f["message"]
    assert f["doc"].endswith("EVRF066.html")
    monkeypatch.setenv("NEURON_CC_FLAGS", "--lnc=2")
    code, doc, _ = check(LAUNCHED, "--arg", "x=float32[256,64]")
    assert code == 0 and doc["findings"] == []
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")  # a kernel without a grid takes the environment's
    code, doc, path = check(COPY, "--arg", "x=float32[256,64]")
    assert code == 1 and "LNC=1 (NEURON_LOGICAL_NC_CONFIG=1), but neuronx-cc is using LNC=2 (NEURON_CC_FLAGS " \
                         "--lnc=2)" in doc["findings"][0]["message"]
    assert doc["findings"][0]["location"] == f"{path}:{line_of(path, 'def copy_rows')}"
    code, doc, _ = check(COPY, "--arg", "x=float32[256,64]", "--nki-version", "0.6")
    assert code == 0 and doc["findings"] == []  # NKI 0.6's compiler does not check it

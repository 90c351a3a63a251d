"""`trnsim run FILE.py [ARGS]`: run an unmodified NKI kernel script on the emulator (`import nki` -> trnsim)."""
from __future__ import annotations

import contextlib
import os
import runpy
import sys

import click

from trnsim import specs
from trnsim.cli import cli, emit_json


@contextlib.contextmanager
def target_env(target: str | None):
    """NEURON_PLATFORM_TARGET_OVERRIDE set to `target` inside the block (unchanged when None)."""
    key, old = "NEURON_PLATFORM_TARGET_OVERRIDE", os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
    if target:
        os.environ[key] = target
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def run_user_file(path: str, run_name: str) -> dict:
    """runpy.run_path, with what the user's file raises (a syntax error, a NameError) as one UserCodeError;
    trnsim's own errors and SystemExit pass through."""
    from trnsim.errors import TrnsimError, UserCodeError

    try:
        return runpy.run_path(path, run_name=run_name)
    except (TrnsimError, SystemExit, KeyboardInterrupt):
        raise
    except Exception as e:
        raise UserCodeError.from_exception(e, path) from None


def run_file(path: str, args=(), target: str | None = None, force: bool = False) -> list[dict]:
    """Run a script with the nki shim installed; returns what each kernel launch did."""
    from trnsim import shim
    from trnsim.nki import _frontend

    shim.install(force=force)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    _frontend.LAUNCHES.clear()
    try:
        with target_env(target):
            run_user_file(path, "__main__")
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    return list(_frontend.LAUNCHES)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--target", type=click.Choice(specs.targets()), help="NeuronCore generation (default: "
              "NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).")
@click.option("--force-shim", is_flag=True, help="Shadow a real installed nki package.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary of the kernel launches.")
def run(file, args, target, force_shim, as_json):
    """Run FILE.py, whose `import nki` resolves to the emulator."""
    # with --json, stdout carries only the JSON: the script's own prints go to stderr
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        launches = run_file(file, args, target, force_shim)
    sys.stderr.flush()  # the script's lines come out before the JSON
    if as_json:
        click.echo(emit_json({"file": file, "launches": launches}, indent=None))  # one line
    else:
        for l in launches:
            click.echo(f"trnsim: {l['kernel']} on {l['target']} (LNC {l['lnc']}): {l['instructions']} instructions",
                       err=True)


_TOUR_KERNEL = '''
import numpy as np
import nki, nki.language as nl, nki.isa as nisa

@nki.jit
def softmax(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.softmax(nl.load(x)))
    return out

@nki.jit
def too_wide(a, b):
    acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, nl.load(a), nl.load(b))   # N = 1024 > one PSUM bank

@nki.jit
def gather_exp(x, idx, n):
    t = nl.load(x)
    g = nl.ndarray((x.shape[0], n), x.dtype, buffer=nl.sbuf)
    nisa.activation(g, nl.exp, t.indirect(nl.load(idx), n))   # NKI 0.7 Tensor Indirection
    out = nl.ndarray(g.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, g)
    return out

@nki.jit
def copy_rows(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(3):                  # three tiles of 128 rows, whatever x holds
        nl.store(out[r * 128:(r + 1) * 128], nl.load(x[r * 128:(r + 1) * 128]))
    return out
'''


@contextlib.contextmanager
def tour_kernel_file():
    """The tour's kernel file, written to a scratch folder, with the nki shim installed while it is used:
    (path, folder)."""
    import tempfile

    from trnsim import shim

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "softmax_kernel.py")
        with open(path, "w") as f:
            f.write(_TOUR_KERNEL)
        was = shim.installed()
        shim.install(force=True)
        try:
            yield path, d
        finally:
            if not was:
                shim.uninstall()


def tour(console) -> None:
    """Run a softmax kernel file through the nki shim, compare with numpy, then show a caught error."""
    with tour_kernel_file() as (path, d):
        with target_env("trn2"):
            _tour_run(console, path, d)
        with target_env("trn3"):
            _tour_indirect(console, path)


def _tour_run(console, path: str, tmpdir: str) -> None:
    """The tour's two runs: a kernel checked against numpy, and a rule it breaks."""
    import numpy as np

    from trnsim.errors import TrnsimError

    ns = runpy.run_path(path)
    x = np.random.default_rng(0).standard_normal((128, 512), np.float32)
    got = ns["softmax"](x)
    e = np.exp(x - x.max(1, keepdims=True))
    err = float(np.abs(got - e / e.sum(1, keepdims=True)).max())
    n = len(ns["softmax"].last_cores[0].stream)
    console.print(f"[bold]trnsim run[/]: `import nki` kernel file -> {n} NeuronCore-v3 instructions; "
                  f"softmax matches numpy (max |err| {err:.1e})")
    try:
        ns["too_wide"](np.ones((128, 128), np.float32), np.ones((128, 1024), np.float32))
    except TrnsimError as ex:
        console.print(f"caught [red]{type(ex).__name__}[/]: {str(ex).replace(tmpdir + os.sep, '')}")


def _tour_indirect(console, path: str) -> None:
    """`t.indirect(index)` on a NeuronCore-v4: columns gathered at an index tile's offsets, against numpy."""
    import numpy as np

    ns = runpy.run_path(path)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 512), np.float32)
    offsets = rng.integers(0, 512, 48)
    idx = np.zeros((128, 3), np.int32)
    idx[np.arange(48) % 16, np.arange(48) // 16] = offsets  # offset i at [i % 16, i // 16], as the ISA reads it
    got = ns["gather_exp"](x, idx, 48)
    err = float(np.abs(got - np.exp(x[:, offsets])).max() / np.exp(x[:, offsets]).max())
    verdict = "matches numpy" if err < 1e-6 else "[red]DIFFERS from numpy[/]"
    engines = sorted({r.engine.value for r in ns["gather_exp"].last_cores[0].stream if r.op.name == "TI_GATHER"})
    console.print(f"[bold]t.indirect(index)[/] (NKI 0.7 Tensor Indirection, trn3): exp of 48 columns picked by an "
                  f"index tile, gathered on the {' and '.join(engines)} engine; {verdict} (max relative error "
                  f"{err:.1e})")

"""The `trnsim` command line: one click group, one module per command."""
from __future__ import annotations

import math
import os
import sys

import click

from trnsim import flags
from trnsim.errors import OptionError, TrnsimError


_JSON_FLAGS = ("--json", "-j", "--json-output", "--output-format=json")


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON: a --json spelling among trnsim's own arguments (torchrun's
    script and its arguments are the script's)."""
    for i, a in enumerate(args):
        if a.endswith(".py") and "torchrun" in args[:i]:
            return False
        if a in _JSON_FLAGS or (a == "--output-format" and args[i + 1:i + 2] == ["json"]):
            return True
    return False


def fail(message: str, code: int, kind: str = "error", as_json: bool = False) -> None:
    """Print one error line on stderr (and, under --json, {"error": ...} on stdout) and exit with `code`."""
    if as_json:
        click.echo(emit_json({"error": {"type": kind, "message": message, "exit_code": code}}))
    click.secho(f"trnsim: error: {message}", fg="red", err=True)
    sys.exit(code)


def _notes_on_stderr() -> None:
    """Name notices (a family read as its flagship) print as one `trnsim: note:` line on stderr."""
    import warnings

    from trnsim.specs import NameNotice

    warnings.simplefilter("always", NameNotice)  # trnsim.specs says each once per process
    shown = warnings.showwarning
    if getattr(shown, "trnsim", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, NameNotice):
            click.echo(f"trnsim: note: {message}", err=True)
        else:
            shown(message, category, filename, lineno, file, line)

    show.trnsim = True
    warnings.showwarning = show


def _user_frames(e: TrnsimError) -> None:
    """With TRNSIM_TRACEBACK=1, the frames in the user's own files that led to an error in their code
    (their kernel, its helpers), innermost last; trnsim's and installed packages' frames are left out."""
    import traceback

    from trnsim.errors import UserCodeError, _is_library

    exc = e.exc if isinstance(e, UserCodeError) else e
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_library(f.filename)]
    if frames:
        click.echo("Traceback (the frames in your files, most recent call last):", err=True)
        click.echo("".join(traceback.format_list(frames)).rstrip("\n"), err=True)


class _Group(click.Group):
    """Every error a user can cause becomes one line on stderr and a non-zero exit, never a traceback:
    TrnsimError (its message and code), click's usage errors (naming the option), Ctrl-C (130)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        _notes_on_stderr()
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        js = wants_json(list(sys.argv[1:] if args is None else args))
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except TrnsimError as e:
            if flags.TRACEBACK.raw():
                _user_frames(e)
            fail(str(e), e.exit_code, type(e).__name__, js)
        except click.UsageError as e:
            ctx = e.ctx.parent if e.ctx and e.ctx.command.hidden else e.ctx  # `plan MODEL` runs hidden `plan one`
            where = ctx.command_path if ctx else "trnsim"
            fail(f"{e.format_message()} (see {where} --help)", e.exit_code, "UsageError", js)
        except click.ClickException as e:
            fail(e.format_message(), e.exit_code, type(e).__name__, js)
        except (click.Abort, KeyboardInterrupt):
            fail("interrupted", 130, "KeyboardInterrupt", js)
        except BrokenPipeError:  # `trnsim ... | head`
            sys.stderr.close()
            sys.exit(1)
        except OSError as e:  # a file that cannot be read or written
            fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e), 1, type(e).__name__, js)
        except Exception as e:  # a fault in trnsim itself: one line, the traceback on request
            if flags.TRACEBACK.raw():
                raise
            fail(f"internal error {type(e).__name__}: {e} (TRNSIM_TRACEBACK=1 shows where)", 1, "InternalError", js)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trnsim")
@click.option("--hardware", metavar="CHIP.toml", envvar=flags.HARDWARE.name,
              help="Run every command on a what-if chip: a catalog chip (base = \"trn2\") with changed figures.")
@click.option("--race-check", type=click.Choice(["auto", "off", "warn", "error", "order"]), envvar=flags.RACE_CHECK.name,
              help="Loop-carried dependencies in affine_range loops: auto (default) warns about them where the "
                   "compiler would reorder the loop (beta API; TRNSIM_STRICT=1 refuses them); warn or error checks every affine loop; order reruns the launch with affine iterations reversed, then interleaved, and compares the outputs bit for bit.")
@click.option("--nki-version", type=click.Choice(["0.6", "0.7"]), envvar=flags.NKI_VERSION.name,
              help="The NKI version kernels target (default 0.7): names 0.7 removed run for 0.6 kernels with a "
                   "deprecation warning; names 0.7 added are refused for 0.6.")
@click.option("--neuron-sdk", type=click.Choice(["2024", "2025"]), envvar=flags.NEURON_SDK.name,
              help="The Neuron SDK (release year) whose compiler and runtime build the DMA programs the clock "
                   "times (default 2025): its DMA descriptor and queue costs (docs/timing.md).")
@click.pass_context
def cli(ctx, hardware, race_check, nki_version, neuron_sdk):
    """trnsim: a software Trainium. Run NKI kernels, time them, simulate collectives, plan training."""
    if ctx.invoked_subcommand is None:  # bare `trnsim`: the help, not an error
        click.echo(ctx.get_help())
        return
    if hardware:
        from trnsim import specs

        specs.hardware(hardware).use()
        flags.HARDWARE.set(os.path.abspath(hardware))  # worker processes run on it too
    if race_check:
        flags.RACE_CHECK.set(race_check)
    if nki_version:
        flags.NKI_VERSION.set(nki_version)
    if neuron_sdk:
        flags.NEURON_SDK.set(neuron_sdk)


def _finite(v):
    """JSON without NaN or Infinity (which strict parsers refuse): non-finite floats become "nan", "inf", "-inf"."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def emit_json(obj, indent: int | None = 2) -> str:
    """What every `--json` prints: strict JSON (RFC 8259), numpy scalars as numbers, non-finite floats as strings."""
    import json

    def plain(o):
        if hasattr(o, "item"):  # numpy scalars
            return o.item()
        if hasattr(o, "tolist"):
            return o.tolist()
        return str(o)

    return json.dumps(_finite(json.loads(json.dumps(obj, default=plain))), indent=indent, allow_nan=False)


def output_file(option: str, path: str | None) -> str | None:
    """`path` if a file can be written there, else OptionError naming `option` (before any work is done)."""
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OptionError(option, f"{path} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise OptionError(option, f"cannot write {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise OptionError(option, f"cannot write {path}: folder {folder} is not writable")
    return path


CHARTS_MISSING = "not drawn: charts need matplotlib (pip install 'trnsim[charts]')"


def charts_installed() -> bool:
    """Whether matplotlib, an optional extra used only for PNG charts, is installed."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def output_folder(option: str, path: str):
    """The folder `path`, created if missing, else OptionError naming `option`."""
    from pathlib import Path

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OptionError(option, f"cannot create folder {path}: {e.strerror}") from None
    if not os.access(path, os.W_OK):
        raise OptionError(option, f"cannot write into folder {path}")
    return Path(path)


def _register():
    """Import every module of this package: each adds its own command to `cli`."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")


_register()


def main():
    cli(prog_name="trnsim")

"""The `trnsim` command line: one click group, one module per command."""
from __future__ import annotations

import math
import os
import sys

import click

from trnsim.errors import OptionError, TrnsimError


def fail(message: str, code: int) -> None:
    """Print one error line on stderr and exit with `code`."""
    click.secho(f"trnsim: error: {message}", fg="red", err=True)
    sys.exit(code)


class _Group(click.Group):
    """Every error a user can cause becomes one line on stderr and a non-zero exit, never a traceback:
    TrnsimError (its message and code), click's usage errors (naming the option), Ctrl-C (130)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except TrnsimError as e:
            fail(str(e), e.exit_code)
        except click.UsageError as e:
            ctx = e.ctx.parent if e.ctx and e.ctx.command.hidden else e.ctx  # `plan MODEL` runs hidden `plan one`
            where = ctx.command_path if ctx else "trnsim"
            fail(f"{e.format_message()} (see {where} --help)", e.exit_code)
        except click.ClickException as e:
            fail(e.format_message(), e.exit_code)
        except (click.Abort, KeyboardInterrupt):
            fail("interrupted", 130)
        except BrokenPipeError:  # `trnsim ... | head`
            sys.stderr.close()
            sys.exit(1)
        except OSError as e:  # a file that cannot be read or written
            fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e), 1)
        except Exception as e:  # a fault in trnsim itself: one line, the traceback on request
            if os.environ.get("TRNSIM_TRACEBACK"):
                raise
            fail(f"internal error {type(e).__name__}: {e} (TRNSIM_TRACEBACK=1 shows where)", 1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trnsim")
@click.option("--hardware", metavar="CHIP.toml", envvar="TRNSIM_HARDWARE",
              help="Run every command on a what-if chip: a catalog chip (base = \"trn2\") with changed figures.")
@click.option("--race-check", type=click.Choice(["auto", "off", "warn", "error", "order"]), envvar="TRNSIM_RACE_CHECK",
              help="Loop-carried dependencies in affine_range loops: auto (default) warns about them where the "
                   "compiler would reorder the loop (beta API; TRNSIM_STRICT=1 refuses them); warn or error checks every affine loop; order reruns the launch with affine iterations reversed, then interleaved, and compares the outputs bit for bit.")
@click.option("--nki-version", type=click.Choice(["0.6", "0.7"]), envvar="TRNSIM_NKI_VERSION",
              help="The NKI version kernels target (default 0.7): names 0.7 removed run for 0.6 kernels with a "
                   "deprecation warning; names 0.7 added are refused for 0.6.")
def cli(hardware, race_check, nki_version):
    """trnsim: a software Trainium. Run NKI kernels, time them, simulate collectives, plan training."""
    if hardware:
        from trnsim import specs

        specs.hardware(hardware).use()
        os.environ["TRNSIM_HARDWARE"] = os.path.abspath(hardware)  # worker processes run on it too
    if race_check:
        os.environ["TRNSIM_RACE_CHECK"] = race_check
    if nki_version:
        os.environ["TRNSIM_NKI_VERSION"] = nki_version


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

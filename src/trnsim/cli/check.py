"""`trnsim check KERNEL.py`: what stands between a kernel and the NKI version it targets, before it runs.

Three passes: the source is read (ast) for names the target version removed or lacks; the kernel is traced on
shapes alone (its `--arg`s, as `trnsim profile` takes them, or the file's `inputs()`) for the named errors the
compiler would raise and the deprecations it warns of; and each tensor the kernel returns is checked for
elements no instruction of the trace wrote (a kernel that returns zeros after an SDK upgrade).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import re
import warnings
from typing import TYPE_CHECKING

import click

from trnsim import specs
from trnsim.cli import cli, emit_json
from trnsim.errors import TrnsimError, UserCodeError

if TYPE_CHECKING:
    import numpy as np

_MODULES = {"nki.language": "nl", "nki.isa": "nisa"}
_BETA = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-migration-guide.html"


def _finding(kind: str, severity: str, message: str, location: str, doc: str | None = None) -> dict:
    return {"kind": kind, "severity": severity, "message": message, "location": location, "doc": doc}


# -- the source ------------------------------------------------------------------------------------------
def _dotted(node) -> str | None:
    """`a.b.c` of a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _api_name(full: str) -> str | None:
    """`nl.X` / `nisa.X` for a dotted name inside nki.language or nki.isa (either namespace), else None."""
    full = full.removeprefix("neuronxcc.")
    for module, short in _MODULES.items():
        if full.startswith(module + "."):
            return f"{short}.{full[len(module) + 1:].split('.')[0]}"
    return None


def static_findings(path: str, source: str, version: str) -> list[dict]:
    """Names in the source that the targeted NKI version removed or lacks, and the beta namespace."""
    from trnsim.nki import versions

    tree = ast.parse(source, filename=path)
    aliases: dict[str, str] = {}  # local name -> the dotted name it stands for
    out, seen = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        else:
            continue
        full = [a.name if isinstance(node, ast.Import) else f"{node.module}.{a.name}" for a in node.names]
        if not out and any(n == "neuronxcc.nki" or n.startswith("neuronxcc.nki.") for n in full):  # said once
            out.append(_finding("namespace", "warning",
                                "neuronxcc.nki is the beta API, which Neuron 2.28 and later (NKI 0.2+) no longer "
                                "ship; trnsim runs it as the beta API, NKI 0.7 kernels import nki",
                                f"{path}:{node.lineno}", _BETA))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)) or not isinstance(getattr(node, "ctx", None), ast.Load):
            continue
        dotted = _dotted(node)
        head, _, rest = (dotted or "").partition(".")
        if head not in aliases:
            continue
        name = _api_name(f"{aliases[head]}.{rest}" if rest else aliases[head])
        if name is None or (name, node.lineno) in seen:
            continue
        seen.add((name, node.lineno))
        at = f"{path}:{node.lineno}"
        if name in versions.REMOVED_IN_07:
            replacement = versions.REMOVED_IN_07[name]
            if version == "0.7":
                out.append(_finding("removed", "error", f"{name} was removed in NKI 0.7: use {replacement}", at,
                                    versions.MIGRATION_07))
            else:
                out.append(_finding("deprecated", "warning", f"{name} is deprecated in NKI 0.6 and removed in 0.7: "
                                    f"use {replacement}", at, versions.MIGRATION_07))
        elif name in versions.ADDED_IN_07 and version == "0.6":
            out.append(_finding("added", "error", f"{name} is new in NKI 0.7; NKI 0.6 lacks it", at,
                                versions.page(name)))
    if version == "0.7" and not any(f["kind"] == "namespace" for f in out):  # 0.7 takes no beta kernel
        out += equality_findings(path, tree)
    return out


def _identity_classes(tree) -> set[str]:
    """Classes of the file whose instances `==` compares by identity: no `__eq__` of their own or of a base of
    the file, not a dataclass (which defines one), and no base from elsewhere (whose `__eq__` is unknown here)."""
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    def has_eq(cls, seen=()) -> bool | None:  # None: a base from outside the file
        if any(isinstance(b, ast.FunctionDef) and b.name == "__eq__" for b in cls.body):
            return True
        for d in cls.decorator_list:
            call = d if isinstance(d, ast.Call) else None
            if (_dotted(call.func if call else d) or "").split(".")[-1] == "dataclass":
                return not any(k.arg == "eq" and isinstance(k.value, ast.Constant) and k.value.value is False
                               for k in (call.keywords if call else ()))
        for b in cls.bases:
            name = _dotted(b) or ""
            if name == "object" or name.split(".")[-1] == "NKIObject":
                continue
            if name not in classes or name in seen:
                return None
            got = has_eq(classes[name], seen + (cls.name,))
            if got is not False:
                return got
        return False
    return {name for name, cls in classes.items() if has_eq(cls) is False}


def equality_findings(path: str, tree) -> list[dict]:
    """`==` / `!=` on instances of the file's classes without `__eq__`: NKI 0.7 traces the kernel as ordinary
    Python, so such a comparison is true only for the very same object, where NKI 0.6's specialization
    compared them its own way (the 0.7 migration guide: kernels using `==` on user classes can behave
    differently)."""
    from trnsim.nki import versions

    plain = _identity_classes(tree)
    if not plain:
        return []
    out = []
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        made = {}  # a name -> the class of the instance assigned to it (`a = C()`, `a, b = C(), D()`)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    both = isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    pairs = zip(t.elts, node.value.elts) if both else [(t, node.value)]
                    made.update((n.id, _dotted(v.func)) for n, v in pairs if isinstance(n, ast.Name)
                                and isinstance(v, ast.Call) and _dotted(v.func) in plain)

        def instance_of(e):
            if isinstance(e, ast.Call) and _dotted(e.func) in plain:
                return _dotted(e.func)
            return made.get(e.id) if isinstance(e, ast.Name) else None
        for node in ast.walk(scope):
            if not isinstance(node, ast.Compare) or not any(isinstance(o, (ast.Eq, ast.NotEq)) for o in node.ops):
                continue
            cls = next(filter(None, map(instance_of, [node.left, *node.comparators])), None)
            if cls is not None:
                out.append(_finding("equality", "warning",
                                    f"`==` on instances of {cls}, which defines no __eq__: NKI 0.7 traces kernels "
                                    f"as ordinary Python, where this compares identity (true only for the same "
                                    f"object), not the fields; define __eq__ (or make {cls} a dataclass) or "
                                    f"compare the fields", f"{path}:{node.lineno}", versions.MIGRATION_07))
    unique = {f["location"]: f for f in out}  # a nested function's compare is seen from each enclosing scope
    return sorted(unique.values(), key=lambda f: int(f["location"].rsplit(":", 1)[1]))


def lnc_findings(path: str, source: str, kernel, compiler: int | None, target: str | None) -> list[dict]:
    """NKI 0.7's compiler check of the kernel's LNC degree (NCC_EVRF066) against the compiler's, where the
    compiler's is set (`--lnc`, NEURON_CC_FLAGS, NEURON_LOGICAL_NC_CONFIG; a kernel compiled alone takes its
    own): at each `kernel[lnc](...)` launch of the file, else for a launch without a grid."""
    from trnsim.nki import _frontend

    explicit = compiler is not None or os.environ.get(_frontend.LNC_ENV) or re.search(
        r"(?:--lnc|-lnc|--logical-nc-config)\b", os.environ.get("NEURON_CC_FLAGS", ""))
    if not explicit or not getattr(kernel, "checks_lnc", False):
        return []
    name, tree = kernel.fn.__name__, ast.parse(source)
    grids = [(n.lineno, n.slice.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript)
             and isinstance(n.value, ast.Name) and n.value.id == name and isinstance(n.slice, ast.Constant)
             and isinstance(n.slice.value, int)]
    defined = next((n.lineno for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name),
                   kernel.fn.__code__.co_firstlineno)
    out = []
    for line, grid in grids or [(defined, None)]:
        message = _frontend.lnc_mismatch(name, _frontend.lnc_degrees(grid, target, compiler))
        if message:
            out.append(_finding("lnc", "error", message.split(" (see ")[0], f"{path}:{line}", _frontend.EVRF066))
    return out


# -- the trace -------------------------------------------------------------------------------------------
def _views(x) -> list:
    """The core views among what a kernel returned (beta tiles made views; tuples, lists and dicts opened)."""
    from trnsim.core import View

    if isinstance(x, View):
        return [x]
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in _views(item)]
    if isinstance(x, dict):
        return [v for item in x.values() for v in _views(item)]
    if callable(getattr(x, "view", None)):  # a beta Tile
        return [x.view()]
    return []


def _offsets(shape, strides, offset) -> np.ndarray:
    """Element offsets of a strided view, flattened."""
    import numpy as np

    idx = np.full((1,) * len(shape), offset, np.int64)
    for k, (n, s) in enumerate(zip(shape, strides)):
        ax = [1] * len(shape)
        ax[k] = n
        idx = idx + np.arange(n, dtype=np.int64).reshape(ax) * s
    return idx.reshape(-1)


def unwritten(view, cores) -> np.ndarray | None:
    """True per element of the HBM `view` that no instruction of the cores' streams wrote (from their records,
    so a timing-only trace tells); None when a scatter wrote its tensor (whose rows only values tell)."""
    import numpy as np

    space, memory, _, b0, nbytes, _ = view.alloc.place
    written = np.zeros(nbytes, bool)
    for core in cores:
        for rec in core.stream:
            for name in rec.writes:
                p = rec.placed.get(name)
                if p is None or p[0][0] != space or p[0][1] != memory:
                    continue
                place, dtype, shape, strides, offset, _, _, indirect, _ = p
                if indirect:
                    return None
                start = place[3] - b0 + _offsets(shape, strides, offset) * dtype.itemsize
                for byte in range(dtype.itemsize):
                    at = start + byte
                    written[at[(at >= 0) & (at < nbytes)]] = True
    isz = view.dtype.itemsize
    start = view.alloc.place[3] - b0 + _offsets(view.shape, view.strides, view.offset) * isz
    hit = np.ones(start.shape, bool)
    for byte in range(isz):
        hit &= written[start + byte]
    return ~hit.reshape(view.shape)


def _unwritten_finding(view, mask) -> dict:
    import numpy as np

    from trnsim.core.machine import _ranges

    n = int(mask.sum())
    rows = np.unique(np.argwhere(mask)[:, 0]) if mask.ndim else np.array([0])
    what = "never written" if n == mask.size else f"{n:,} of {mask.size:,} elements never written (rows {_ranges(rows)})"
    return _finding("unwritten", "error",
                    f"returned tensor {view.name!r} ({view.dtype.name}{list(view.shape)}): {what}; the hardware "
                    f"returns whatever its memory held there", view.alloc.location)


def _at(location: str) -> str:
    return location.rpartition(" at ")[2] if " at " in location else location


def trace_findings(kernel, args, kwargs, target, path: str) -> tuple[list[dict], bool]:
    """Run the kernel on shapes (on values where a register read from memory decides control flow) and
    report what it raised, what it warned of and its never-written outputs; and whether the trace ended."""
    from trnsim.core.errors import KernelError, NkiDeprecationWarning, ValueUnknownError
    from trnsim.nki import versions

    fn = kernel.fn
    kwargs = {**inspect.signature(fn).bind_partial(*args).arguments, **kwargs}
    returned: list = []

    @functools.wraps(fn)
    def keeping(**kw):
        out = fn(**kw)
        if not returned:
            returned.append((out, [v.alloc for v in _views(list(kw.values()))]))
        return out

    traced = type(kernel).__new__(type(kernel))
    vars(traced).update(vars(kernel))
    traced.fn = keeping
    out: list[dict] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            try:
                cores = traced.trace(target=target, values=False, **kwargs)
            except ValueUnknownError:  # a value decides control flow: trace with the inputs' values
                returned.clear()
                cores = traced.trace(target=target, values=True, **kwargs)
        except KernelError as e:
            out.append(_finding("refused", "error", f"{type(e).__name__}: {e.rule}", e.location))
            cores = None
        except TrnsimError as e:
            out.append(_finding("refused", "error", f"{type(e).__name__}: {e}", path))
            cores = None
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # the kernel's own Python raised
            err = UserCodeError.from_exception(e, path)
            out.append(_finding("raised", "error", str(err).rsplit(" at ", 1)[0], _at(str(err))))
            cores = None
    for w in caught:
        text = str(w.message)
        if text.startswith("returned tensor"):  # a values run's own note; the records say the same below
            continue
        if os.path.abspath(w.filename) != os.path.abspath(path):  # the user's kernel lines only
            continue
        deprecated = issubclass(w.category, NkiDeprecationWarning)
        removed = deprecated and versions.target() == "0.7"  # the 0.7 compiler refuses what trnsim still runs
        out.append(_finding("removed" if removed else "deprecated" if deprecated else w.category.__name__,
                            "error" if removed else "warning", text, f"{w.filename}:{w.lineno}",
                            versions.MIGRATION_07 if deprecated else None))
    if cores is not None and returned:
        result, inputs = returned[0]
        for view in _views(result):
            if view.on_chip or any(view.alloc is a for a in inputs):
                continue
            mask = unwritten(view, cores)
            if mask is not None and mask.any():
                out.append(_unwritten_finding(view, mask))
    return out, cores is not None


@contextlib.contextmanager
def _targeting(version: str):
    from trnsim.nki import versions

    old = os.environ.get(versions.ENV)
    os.environ[versions.ENV] = version
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(versions.ENV, None)
        else:
            os.environ[versions.ENV] = old


def _merge(static: list[dict], traced: list[dict]) -> list[dict]:
    """The trace's findings less those the source already named at the same line."""
    lines = {f["location"] for f in static}
    return static + [f for f in traced if f["location"] not in lines or f["kind"] == "unwritten"]


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--arg", "argv", multiple=True, metavar="NAME=DTYPE[SHAPE]",
              help="A kernel argument, as trnsim profile takes it (a=bf16[4096,8192], or NAME=VALUE). Without "
                   "--arg the file's inputs() gives them; with neither, only the source is read.")
@click.option("--nki-version", "version", type=click.Choice(["0.6", "0.7"]), default=None,
              help="The NKI version to check against (default: trnsim --nki-version, else 0.7).")
@click.option("--kernel", "name", metavar="NAME", help="Which kernel of FILE (default: the last one defined).")
@click.option("--target", type=click.Choice(specs.targets()), help="NKI target (default: trn2).")
@click.option("--lnc", type=click.IntRange(1, 2), default=None,
              help="The compiler's LNC degree (neuronx-cc --lnc) to check the kernel's against (default: --lnc in "
                   "NEURON_CC_FLAGS, else NEURON_LOGICAL_NC_CONFIG; with none, the kernel is compiled alone).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def check(file, argv, version, name, target, lnc, as_json, quiet):
    """Check an NKI kernel against the NKI version it targets, without hardware.

    Lists names the version removed or lacks (with the documentation page), the named errors the
    compiler would raise (a trace on shapes alone), and returned tensors the kernel never fully writes.
    Exits 1 when it finds an error.
    """
    from trnsim.cli.profile import _Progress, kernel_arguments, load_kernel
    from trnsim.errors import ConfigError, read_user_file
    from trnsim.nki import versions

    version = version or versions.target()
    source = read_user_file(file, "a kernel file", ConfigError)
    with _targeting(version), _Progress(quiet or as_json) as bar:
        bar.phase("reading the source")
        try:
            findings = static_findings(file, source, version)
        except SyntaxError as e:
            findings = [_finding("syntax", "error", f"SyntaxError: {e.msg}", f"{file}:{e.lineno}")]
        traced, note = False, None
        if not any(f["kind"] == "syntax" for f in findings):
            bar.phase("loading the kernel")
            kernel, inputs = load_kernel(file, name, need_inputs=False)
            if version == "0.7":
                findings += lnc_findings(file, source, kernel, lnc, target)
            args, kwargs = (), {}
            if argv:
                kwargs = kernel_arguments(kernel, argv, values=False, target=target)
            elif inputs is not None:
                try:
                    given = inputs()
                except Exception as e:
                    raise UserCodeError.from_exception(e, file) from None
                args, kwargs = ((), given) if isinstance(given, dict) else (tuple(given), {})
            if argv or inputs is not None:
                bar.phase(f"tracing {kernel.__name__} on shapes")
                more, traced = trace_findings(kernel, args, kwargs, target, file)
                findings = _merge(findings, more)
            else:
                note = "not traced: give the kernel's arguments with --arg NAME=DTYPE[SHAPE] or an inputs() function"
    errors = sum(f["severity"] == "error" for f in findings)
    if as_json:
        click.echo(emit_json({"file": file, "nki_version": version, "traced": traced, "note": note,
                              "errors": errors, "warnings": len(findings) - errors, "findings": findings}))
    else:
        for f in findings:
            color = "red" if f["severity"] == "error" else "yellow"
            doc = f" (see {f['doc']})" if f["doc"] else ""
            click.echo(f"{f['location']}: " + click.style(f["severity"], fg=color) + f": {f['message']}{doc}")
        if note:
            click.echo(note)
        click.echo(f"{errors} error(s), {len(findings) - errors} warning(s) for NKI {version}"
                   + ("" if traced or note else "; the trace stopped at its first error"))
    return 1 if errors else 0


def tour(console) -> None:
    """`trnsim check` on the tour's kernel file: a kernel that leaves rows of its output unwritten, found
    on shapes alone, before any run."""
    from trnsim.cli.run import tour_kernel_file

    with tour_kernel_file() as (path, _):
        _tour_check(console, path)


def _tour_check(console, path: str) -> None:
    from trnsim.cli.profile import kernel_arguments, load_kernel

    kernel, _ = load_kernel(path, "copy_rows", need_inputs=False)
    kwargs = kernel_arguments(kernel, ["x=bf16[512,64]"], values=False, target="trn2")
    found, _ = trace_findings(kernel, (), kwargs, "trn2", path)
    console.print("[bold]trnsim check[/] softmax_kernel.py --kernel copy_rows --arg 'x=bf16[512,64]':")
    for f in found:
        console.print(f"  {os.path.basename(f['location'])}: [red]{f['severity']}[/]: {f['message']}")

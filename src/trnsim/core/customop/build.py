"""Build a custom-operator library from its compute and shape sources with the host's C++ compiler.

The sources are compiled against trnsim's copy of the Neuron tensor library (include/), C++14 as on the
device. A library is built in two links: the shape sources alone first, to learn from their NEURON_LIBRARY
block which kernel functions the operators name, then the whole library, each compute source with the
registration of the kernel functions it defines. A rebuild happens only when a source or a flag changed.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
from importlib import resources

from trnsim.core.customop.errors import CustomOpBuildError, CustomOpCompileError

INCLUDE = str(resources.files("trnsim.core.customop").joinpath("include"))
RESERVED = {"builtin"}
_ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$", re.M)
_LOCATION = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+:", re.M)


def compiler() -> str:
    """The C++ compiler: $CXX, else g++, c++ or clang++ on PATH."""
    for name in filter(None, (os.environ.get("CXX"), "g++", "c++", "clang++")):
        path = shutil.which(name)
        if path:
            return path
    raise CustomOpBuildError("custom C++ operators are built with the host's C++ compiler and none was found: install "
                             "one (Debian/Ubuntu: apt-get install g++) or name it in $CXX")


def build(name: str, compute_srcs, shape_srcs, build_directory: str | None = None, multicore: bool = False,
          extra_cflags=(), extra_include_paths=(), verbose: bool = False, max_stack_bytes: int | None = None) -> str:
    """Compile and link `lib<name>.so` in `build_directory`; returns its path."""
    if not re.fullmatch(r"[A-Za-z_]\w*", str(name)):
        raise CustomOpBuildError(f"custom-op library name {name!r}: a C identifier is needed (it names lib<name>.so)")
    if name in RESERVED:
        raise CustomOpBuildError(f"custom-op library name {name!r} is reserved by the Neuron runtime; choose another")
    compute = _sources(compute_srcs, "compute_srcs")
    shape = _sources(shape_srcs, "shape_srcs")
    flags = [str(f) for f in (extra_cflags or ())]
    _check_stack(flags, max_stack_bytes)
    out_dir = os.path.abspath(build_directory or _default_dir(name))
    os.makedirs(out_dir, exist_ok=True)
    lib = os.path.join(out_dir, f"lib{name}.so")
    includes = [INCLUDE, *map(os.path.abspath, extra_include_paths or ()),
                *dict.fromkeys(os.path.dirname(p) for p in compute + shape)]
    base = [compiler(), "-std=c++14", "-O2", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
            *(f"-I{d}" for d in includes), *flags]
    digest = _digest(compute + shape, base, multicore)
    stamp = lib + ".json"
    if os.path.exists(lib) and _read_stamp(stamp) == digest:
        return lib
    work = os.path.join(out_dir, f".{name}-build")
    os.makedirs(work, exist_ok=True)
    shape_objs = [_compile(base, src, os.path.join(work, f"shape{i}.o"), verbose) for i, src in enumerate(shape)]
    kernels = _kernel_names(base, shape_objs, work, multicore, verbose, digest[:16])
    codes = {src: _code(src) for src in compute}
    defined = {src: [k for k in kernels if re.search(rf"\b{re.escape(k)}\b", code)] for src, code in codes.items()}
    missing = [k for k in kernels if not any(k in d for d in defined.values())]
    if missing:
        raise CustomOpBuildError(f"kernel function(s) {', '.join(missing)} named in NEURON_LIBRARY are not defined in "
                                 f"compute_srcs ({', '.join(compute)})")
    compute_objs = []
    for i, src in enumerate(compute):  # each compute source with the registration of the kernels it defines
        wrapper = os.path.join(work, f"compute{i}.cpp")
        with open(wrapper, "w") as f:
            f.write(f'#include "{src}"\n#include <torchneuron/register.h>\n')
            for j, k in enumerate(defined[src]):
                f.write(f'static ::trnsim::KernelRegistrar trnsim_kernel_{j}("{k}", &{k});\n')
        compute_objs.append(_compile(base, wrapper, os.path.join(work, f"compute{i}.o"), verbose, shown=src))
    _link(base, shape_objs + compute_objs, lib, multicore, verbose)
    with open(stamp, "w") as f:
        json.dump({"digest": digest, "multicore": bool(multicore)}, f)
    return lib


def _sources(srcs, what: str) -> list[str]:
    if isinstance(srcs, (str, os.PathLike)):
        srcs = [srcs]
    out = [os.path.abspath(os.fspath(s)) for s in srcs or ()]
    if not out:
        raise CustomOpBuildError(f"{what}: at least one C++ source file is needed")
    for p in out:
        if not os.path.isfile(p):
            raise CustomOpBuildError(f"{what}: no such file {p}")
    return out


def _check_stack(flags: list[str], limit: int | None) -> None:
    for f in flags:
        m = re.fullmatch(r"-DSTACK_SIZE=(\d+)", f)
        if m and limit is not None and int(m.group(1)) > limit:
            raise CustomOpBuildError(f"extra_cflags {f}: the largest stack a custom operator may ask for is {limit} bytes")


def _default_dir(name: str) -> str:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "trnsim", "customop", name)


def _digest(srcs: list[str], base: list[str], multicore: bool) -> str:
    h = hashlib.sha256(json.dumps([base, bool(multicore)]).encode())
    for p in dict.fromkeys([*srcs, *_headers()]):
        with open(p, "rb") as f:
            h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()


def _headers() -> list[str]:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(INCLUDE) for f in files)


def _read_stamp(path: str) -> str | None:
    try:
        with open(path) as f:
            return json.load(f).get("digest")
    except (OSError, ValueError, AttributeError):
        return None


def _code(path: str) -> str:
    """A source's text without comments and string literals (so a name in a comment is not a definition)."""
    with open(path, errors="replace") as f:
        text = f.read()
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', " ", text, flags=re.S)


def _run(cmd: list[str], verbose: bool, shown: str | None = None) -> None:
    if verbose:
        print(" ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise CustomOpCompileError(_first_error(p.stderr or p.stdout, shown))


def _first_error(text: str, shown: str | None) -> str:
    """The compiler's first error as `file:line: message`, placed in the user's source where it can be."""
    m = _ERROR.search(text)
    if not m:
        return "the C++ compiler failed:\n" + text.strip()[-2000:]
    where, msg = f"{m.group('file')}:{m.group('line')}", m.group("msg")
    if m.group("file").startswith((INCLUDE, os.sep + ".")) or "-build/" in m.group("file"):
        users = [u for u in _LOCATION.finditer(text) if not u.group("file").startswith(INCLUDE) and "-build/" not in u.group("file")]
        if users:
            where = f"{users[0].group('file')}:{users[0].group('line')}"
        elif shown:
            where = shown
    return f"{where}: error: {msg}"


def _compile(base: list[str], src: str, obj: str, verbose: bool, shown: str | None = None) -> str:
    _run([*base, "-c", src, "-o", obj], verbose, shown)
    return obj


def _abi(multicore: bool, verbose: bool, base: list[str]) -> str:
    """The entry points' object, shared by every library built with the same flags and headers."""
    key = _digest(_headers(), base, multicore)[:20]
    cache = _default_dir(".abi")
    obj = os.path.join(cache, f"abi-{key}.o")
    if not os.path.exists(obj):
        os.makedirs(cache, exist_ok=True)
        src = os.path.join(cache, f"abi-{key}-{os.getpid()}.cpp")
        with open(src, "w") as f:
            f.write(f"#define TRNSIM_MULTICORE {int(bool(multicore))}\n#include <trnsim/abi.h>\n")
        os.replace(_compile(base, src, src[:-4] + ".o", verbose), obj)
        os.remove(src)
    return obj


def _link(base: list[str], objs: list[str], lib: str, multicore: bool, verbose: bool) -> None:
    tmp = lib + f".{os.getpid()}.tmp"
    _run([*base, "-shared", *objs, _abi(multicore, verbose, base), "-o", tmp], verbose)
    os.replace(tmp, lib)


def _kernel_names(base: list[str], shape_objs: list[str], work: str, multicore: bool, verbose: bool,
                  tag: str) -> list[str]:
    """The kernel functions the shape sources' NEURON_LIBRARY names, read from a library of those alone."""
    probe = os.path.join(work, f"shapes-{tag}.so")  # a new name per build: dlopen caches by path
    _link(base, shape_objs, probe, multicore, verbose)
    info = _registry(probe)
    if not info["libraries"]:
        raise CustomOpBuildError("shape_srcs define no NEURON_LIBRARY(<name>, m) { m.def(...); } block: the operators "
                                 "are registered there (#include \"torchneuron/register.h\")")
    return list(dict.fromkeys(op["kernel"] for op in info["ops"]))


def _registry(path: str) -> dict:
    lib = ctypes.CDLL(path)
    fn = lib.trnsim_customop_registry
    fn.restype = ctypes.c_char_p
    return json.loads(fn().decode())

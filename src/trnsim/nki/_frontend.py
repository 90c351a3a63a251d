"""Translation helpers shared by the NKI front ends: the current core, kernel launch, argument conversion.

A kernel's Python runs eagerly on one `NeuronCore` per program (for an LNC 2 launch two threads, one per
`program_id`, sharing one HBM and taking turns: core/lnc.py); every `nki.isa` call becomes one core instruction through `issue`.
Front ends never compute values: they only allocate tensors and issue instructions.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import math
import os
import re
import threading
import warnings

import numpy as np

from trnsim import flags, live, numerics
from trnsim.core import NeuronCore, Op, View
from trnsim.core.machine import TARGET_ENV, resolve_target
from trnsim.core import fast, races as _races
from trnsim.core.collector import collector_off
from trnsim.core.errors import (DTypeError, KernelError, MemorySpaceError, ScheduleEdgeError, UninitializedError,
                                UninitializedWarning)
from trnsim.core.limits import Budget
from trnsim.core.lnc import Barrier, Turns
from trnsim.core.timing.scheduler import keep_order as _keep_order
from trnsim.errors import ConfigError, TrnsimError
from trnsim.nki._current import _state, core, issue  # noqa: F401  (the front ends' names for them)
from trnsim.nki.schedule import Schedule

LAUNCH_END: list = []  # calls on a launch's cores when its programs end: an error for what they left undone, or None
LAUNCHES: list[dict] = []  # one summary per kernel launch, for `trnsim run --json`
LAST: dict = {}  # the latest launch: {"kernel": name, "cores": [...]} (`trnsim profile --main` times it)


@contextlib.contextmanager
def no_reorder():
    """The block's instructions keep program order on each engine: the timing model's scheduler otherwise moves
    independent ones (core/timing/scheduler.py: keep_order). nki.language.no_reorder, and the beta API's."""
    nc = core()
    lo = len(nc.stream)
    try:
        yield
    finally:
        _keep_order(nc.stream, lo)


def buffer_name(buffer) -> str:
    """'sbuf' | 'psum' | 'hbm' | 'shared_hbm' | 'private_hbm' from an nl buffer, a string or None (sbuf)."""
    name = getattr(buffer, "value", buffer) or "sbuf"
    return str(name)


def ndarray(shape, dtype, buffer=None, name=None, address=None) -> View:
    """Allocate a tensor in a buffer; outputs go in shared_hbm, which both cores of an LNC 2 share."""
    nc, kind = core(), buffer_name(buffer)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    space = "hbm" if kind.endswith("hbm") else kind
    if kind == "shared_hbm" and nc.peer is not None:
        n = nc._counts["shared"] = nc._counts.get("shared", 0) + 1
        if n not in nc.hbm.shared:  # the cores take turns (core/lnc.py): the first to get here allocates it
            nc.hbm.shared[n] = nc.tensor(shape, dtype, space, name=name or None, address=address, kind=kind)
        return nc.hbm.shared[n]
    return nc.tensor(shape, numerics.dtype(dtype), space, name=name or None, address=address, kind=kind)


def host_constant(constant) -> np.ndarray:
    """The data of `nl.shared_constant`: an array as given, or the array a .npy file holds (read only from a
    regular file, never unpickled)."""
    if not isinstance(constant, str):
        arr = np.asarray(constant)
        if arr.dtype.type is np.void:
            raise DTypeError(f"nl.shared_constant: the array holds raw {arr.dtype.itemsize}-byte records (numpy "
                             f"dtype {arr.dtype.str!r}); give it its ml_dtypes dtype (bfloat16, fp8)")
        return arr
    if not os.path.isfile(constant):
        raise KernelError(f"nl.shared_constant({constant!r}): no such .npy file (a path names a regular file)")
    try:
        arr = np.load(constant, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise KernelError(f"nl.shared_constant({constant!r}): not a .npy array file ({e})") from None
    if arr.dtype.type is np.void:  # numpy has no bfloat16 or fp8: it saves ml_dtypes arrays as raw bytes
        raise DTypeError(f"nl.shared_constant({constant!r}) holds raw {arr.dtype.itemsize}-byte records (numpy dtype "
                         f"{arr.dtype.str!r}), which is how numpy saves bfloat16 and fp8 arrays; pass the array itself "
                         f"with its ml_dtypes dtype, or `np.load(path).view(ml_dtypes.bfloat16)` (the dtype it was "
                         f"saved from)")
    return arr


# -- arguments and results -------------------------------------------------------------------------------
def _to_numpy(x):
    """A numpy array from a numpy array or a torch tensor (bf16 kept bit-exact); None if neither."""
    if isinstance(x, np.ndarray):
        return x, "numpy"
    if type(x).__module__.startswith("torch"):
        import torch
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(numerics.bfloat16.np), "torch"
        return t.numpy(), "torch"
    return None, None


def _on_device(x) -> bool:
    """A torch tensor on the XLA or `neuron` device: the kernel is compiled into the model's graph by neuronx-cc
    (a CPU tensor runs on the simulator, as NKI_SIMULATOR=1 runs it)."""
    return type(x).__module__.startswith("torch") and getattr(getattr(x, "device", None), "type", None) in (
        "xla", "neuron")


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of `a` (contiguous), which an HBM tensor reads in place until the kernel writes it."""
    v = np.ascontiguousarray(a).view()
    v.flags.writeable = False
    return v


def _from_numpy(a, kind):
    if kind == "torch":
        import torch
        if a.dtype == numerics.bfloat16.np:
            return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(a))
    return a


class Kernel:
    """An `@nki.jit` kernel: call it with numpy arrays (or torch tensors) to run it on the emulator."""

    checks_lnc = True  # NKI 0.7's compiler checks a framework launch's LNC degree (the beta API has no such check)

    def __init__(self, fn, lnc: int = 1, **options):
        self.fn, self.lnc, self.options = fn, lnc, options
        self.lnc_given = False  # kernel[lnc](...) named it
        functools.update_wrapper(self, fn)
        self.last_cores: list[NeuronCore] = []

    def __getitem__(self, grid):
        lnc = math.prod(grid) if isinstance(grid, tuple) else int(grid)
        if lnc not in (1, 2):
            raise KernelError(f"kernel[{grid}]: a launch runs on a logical NeuronCore of 1 or 2 cores; got {lnc}")
        k = Kernel(self.fn, lnc, **self.options)
        k.lnc_given = True
        return k

    def with_schedule(self, edges, kind=None):
        """The kernel with order edges between its named instructions (nki/schedule.py): a list of pairs
        (consumer name, producer name or list of names). They replace any given before; `kind`, an
        nki.isa.dependency (schedule unless given), says how they are kept."""
        scheduled = copy.copy(self)
        scheduled.options = {**self.options, "_schedule": Schedule.of(edges, kind)}  # carried by the kernel[...] copies
        scheduled.last_cores = []
        return scheduled

    def __call__(self, *args, **kwargs):
        if getattr(getattr(_state, "core", None), "in_launch", False):
            # a kernel calling another jit function: the compiler traces it into the caller, on the same core
            return self.fn(*args, **kwargs)
        return self._run(args, kwargs)

    def trace(self, *args, target=None, values=True, **kwargs) -> list[NeuronCore]:
        """Run the kernel and return its cores (their instruction streams); `values=False` runs on shapes only."""
        self._run(args, kwargs, target=target, values=values)
        return self.last_cores

    def _run(self, args, kwargs, target=None, values=True):
        """One launch; with the race check `order` (and values), three compared ones (core/races.py: in_every_order)."""
        if not values or _races.mode(self.options.get("race_check")) != "order":
            return self._launch(args, kwargs, target=target, values=values)
        code = self.fn.__code__
        return _races.in_every_order(
            lambda a, k, order: self._launch(a, k, target=target, values=values, order=order), args, kwargs,
            code.co_varnames[:code.co_argcount], lambda x: _to_numpy(x)[0], _copy, f"{code.co_filename}:{code.co_firstlineno}")

    def _launch(self, args, kwargs, target=None, values=True, order=None):
        return launch(self, args, kwargs, target=target, values=values, order=order)

    def programs(self) -> Programs:
        """The programs one launch runs (the beta API's SPMD grid overrides it)."""
        return LncPair(self) if self.lnc == 2 else Programs(self)


def launch_budget(options: dict) -> Budget:
    """The bounds of one launch from the kernel's options (`@nki.jit(max_instructions=, max_memory_mb=)`)."""
    return Budget(options.get("max_instructions"), options.get("max_memory_mb"))


def _copy(x):
    """An argument's private copy for a reordered run of the race check `order`."""
    return x.copy() if isinstance(x, np.ndarray) else (x.clone() if type(x).__module__.startswith("torch") else x)


def compile_target() -> str | None:
    """The target a framework call compiles for: `--target` in NEURON_CC_FLAGS (what torch-neuronx passes the
    compiler), unless NEURON_PLATFORM_TARGET_OVERRIDE says; None: the default."""
    flags = os.environ.get("NEURON_CC_FLAGS", "")
    found = re.search(r"--target[=\s]+(\w+)", flags)
    return None if os.environ.get(TARGET_ENV) or not found else found.group(1)


LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
EVRF066 = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/compiler/error-codes/EVRF066.html"


class LncMismatchError(KernelError):
    """A kernel's LNC degree differs from the compiler's (neuronx-cc NCC_EVRF066, checked from NKI 0.7)."""


def _env_lnc(chip) -> int | None:
    value = os.environ.get(LNC_ENV)
    if value is None:
        return None
    if value.strip() not in [str(c) for c in chip.lnc_configs]:
        raise ConfigError(f"{LNC_ENV}={value}: {chip.name} takes {' or '.join(map(str, chip.lnc_configs))}")
    return int(value)


def lnc_degrees(grid: int | None, target: str | None, compiler: int | None = None) -> tuple[int, str, int, str]:
    """The LNC degrees of a kernel launched inside a model and of the compiler compiling it, each with where it
    came from: the kernel's from its kernel[lnc] grid, else NEURON_LOGICAL_NC_CONFIG, else 1; the compiler's
    from `compiler` (trnsim check --lnc), else --lnc (or --logical-nc-config) in NEURON_CC_FLAGS, else
    NEURON_LOGICAL_NC_CONFIG, else the chip's default."""
    from trnsim import specs

    chip = specs.chip(resolve_target(target))
    env = _env_lnc(chip)
    if grid is not None:
        k = (grid, f"kernel[{grid}]")
    else:
        k = (env, f"{LNC_ENV}={env}") if env is not None else (1, "no kernel[lnc] grid")
    flag = re.search(r"(?:--lnc|-lnc|--logical-nc-config)[=\s]+(\d+)", os.environ.get("NEURON_CC_FLAGS", ""))
    if compiler is not None:
        c = (compiler, f"--lnc {compiler}")
    elif flag:
        c = (int(flag.group(1)), f"NEURON_CC_FLAGS {flag.group(0)}")
    elif env is not None:
        c = (env, f"{LNC_ENV}={env}")
    else:
        c = (chip.lnc_default, f"the {chip.name} default")
    return k[0], k[1], c[0], c[1]


def lnc_mismatch(name: str, degrees: tuple[int, str, int, str]) -> str | None:
    """The compiler's message for LNC degrees that differ (neuronx-cc NCC_EVRF066), or None."""
    k, k_why, c, c_why = degrees
    if k == c:
        return None
    return (f"NKI kernel '{name}' is configured with LNC={k} ({k_why}), but neuronx-cc is using LNC={c} ({c_why}) "
            f"(NCC_EVRF066): set {LNC_ENV} to the LNC degree wanted and launch the kernel without a grid, or make "
            f"kernel[lnc] match (see {EVRF066})")


def check_lnc(kernel: Kernel, target: str | None) -> int:
    """The LNC degree a kernel launched inside a model runs at; a degree the compiler does not share is refused,
    as NKI 0.7's compiler does (the LNC degree is a property of the whole compiled graph)."""
    degrees = lnc_degrees(kernel.lnc if kernel.lnc_given else None, target)
    message = lnc_mismatch(kernel.fn.__name__, degrees)
    if message:
        raise LncMismatchError(message)
    return degrees[0]


class Abandoned(BaseException):
    """A program stops because another program of its launch failed (that one's error is the one raised)."""


class Programs:
    """The programs of one launch, as `launch` iterates them: one program on one core (this class), the two
    programs of an LNC 2 launch each on its own core (`LncPair`), or a beta SPMD grid of programs taking turns
    on one core (nki/beta: `SpmdGrid`). Subclasses say which core each program runs on, what a kernel sees
    of its arguments and result, and what each program carries."""

    who = "core"  # what takes turns, as messages name it
    together = True  # programs on cores of their own start at once; else one thread, another when one waits
    hbm_ok = False  # whether a result may live in nl.hbm (the beta API), not only shared_hbm
    arg_kind = "hbm"  # where the arguments are placed

    def __init__(self, kernel):
        self.kernel = kernel
        self.indices = [()]
        self.failed = False

    def cores(self, nc0: NeuronCore) -> list[NeuronCore]:
        return [nc0]

    def core_of(self, n: int) -> int:
        return 0

    def share(self, turns, spawn) -> None:
        """The programs' turns and the way to start a thread for the next ones (None once they are over)."""

    def enter(self, n: int) -> None:
        """Program n is about to run on this thread."""

    def arg(self, view: View):
        return view

    def result(self, res):
        return res

    def fail(self) -> None:
        self.failed = True

    def summary(self) -> dict:
        return {"lnc": len(self.cores_made)}


class LncPair(Programs):
    """The two programs of an LNC 2 launch: one per physical core, sharing one HBM, taking turns at the
    core barrier and sendrecv (core/lnc.py); outputs in shared_hbm."""

    arg_kind = "shared_hbm"

    def __init__(self, kernel):
        super().__init__(kernel)
        self.indices = [(0,), (1,)]

    def cores(self, nc0):
        second = NeuronCore(nc0.target, strict=nc0.strict, values=nc0.values, hbm=nc0.hbm, program_id=1,
                            num_programs=2, budget=nc0.budget, race_check=nc0.race_check, builder=nc0.builder.another())
        nc0.num_programs = 2
        nc0.peer, second.peer = second, nc0
        return [nc0, second]

    def core_of(self, n):
        return n

    def share(self, turns, spawn):
        barrier = Barrier(turns) if turns is not None else None
        for c in self.cores_made:
            c.turns, c.barrier = turns, barrier


def _take_turns(programs: Programs, run) -> None:
    """Run every program: one inline; several with threads taking turns (core/lnc.py), one program running
    at a time, in order, the turn passing where a program waits for the others or ends. Programs on cores
    of their own start together; programs sharing a core start on one thread, and a program about to wait
    calls `spawn` for a thread to take the next ones (a program that ends frees its thread for the next)."""
    n = len(programs.indices)
    if n == 1:
        run(0)
        return
    turns, threads, unclaimed = Turns(n, programs.who), [], iter(range(n))

    def worker():
        for i in unclaimed:
            turns.start(i)
            try:
                run(i)
            finally:
                turns.finish(i)

    def spawn():
        threads.append(threading.Thread(target=worker))
        threads[-1].start()

    programs.share(turns, spawn)
    try:
        for _ in range(n if programs.together else 1):
            spawn()
        for t in threads:  # a thread adds the one it spawns before it waits, so before it ends
            t.join()
    finally:
        programs.share(None, None)  # the closures hold the cores: no cycle keeps them past the launch


def launch(kernel: Kernel, args, kwargs, target=None, values=True, order=None):
    """Run a kernel's programs on fresh cores: inputs become HBM tensors, returned tensors come back as arrays.

    The target is `target=`, else the kernel's `platform_target=`, else (for torch arguments) the compiler's
    target in NEURON_CC_FLAGS, else the default. With `values=False` (timing only) no instruction computes
    and nothing is returned; the cores, with their instruction streams, are left in `kernel.last_cores`
    either way."""
    from trnsim.nki import versions

    target = target or kernel.options.get("platform_target")
    if target is None and any(_to_numpy(a)[1] == "torch" for a in (*args, *kwargs.values())):
        target = compile_target()
    lnc = kernel.lnc
    if kernel.checks_lnc and versions.target() == "0.7" and any(map(_on_device, (*args, *kwargs.values()))):
        lnc = check_lnc(kernel, target)  # NEURON_LOGICAL_NC_CONFIG sets it for a kernel launched without a grid
    programs = (kernel if lnc == kernel.lnc else Kernel(kernel.fn, lnc, **kernel.options)).programs()
    nc0 = NeuronCore(target, strict=flags.STRICT.on(), values=values,
                     budget=launch_budget(kernel.options), race_check=kernel.options.get("race_check"),
                     builder=fast.builder(launch=True))  # the speed layer or the reference, once per launch
    if lnc not in nc0.lnc_configs:
        raise ConfigError(f"an LNC {lnc} launch (kernel[{lnc}]) needs a chip with logical cores of "
                          f"{lnc}; {nc0.target} has LNC {', '.join(map(str, nc0.lnc_configs))}")
    cores = programs.cores_made = programs.cores(nc0)
    for c in cores:
        c.affine_order = order
        c.in_launch = True  # a jit function the kernel calls runs inline (Kernel.__call__)
    backs, sink = [], {"kind": "numpy"}

    def conv(x, name):
        a, k = _to_numpy(x)
        if a is None:
            return x
        sink["kind"] = k
        v = nc0.hbm_tensor(_read_only(a), name=name, kind=programs.arg_kind)  # read in place until written
        backs.append((x, v, k))
        return programs.arg(v)

    names = list(kernel.fn.__code__.co_varnames[: kernel.fn.__code__.co_argcount])
    converted = [conv(a, names[i] if i < len(names) else f"arg{i}") for i, a in enumerate(args)]
    kwconv = {k: conv(v, k) for k, v in kwargs.items()}
    results, errors = [None] * len(programs.indices), []

    def run(n):
        _state.core = cores[programs.core_of(n)]
        programs.enter(n)
        try:
            if not programs.failed:
                results[n] = kernel.fn(*converted, **kwconv)
        except Abandoned:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            programs.fail()
            errors.append(e)

    live.publish(kind="kernel", name=kernel.fn.__name__, cores=range(len(cores)), target=nc0.target,
                 phase="running", memory={"hbm": sum(a.nbytes for a in nc0.hbm.tensors())})
    saved = getattr(_state, "core", None)
    try:
        # Views and records form no cycles: reference counting frees every tensor at once, which is all the
        # allocator relies on, and the cyclic collector stays off (core/collector.py).
        with collector_off():
            _take_turns(programs, run)
            for end in LAUNCH_END:  # each says what its cores left undone (and forgets it)
                left = end(cores)
                if left is not None and not errors:
                    errors.append(left)
            schedule = kernel.options.get("_schedule")
            if schedule is not None and not errors:
                try:
                    schedule.apply(cores)
                except ScheduleEdgeError as e:
                    errors.append(e)
            if not errors:
                for c in cores:
                    c.sync()
    finally:
        _state.core = saved
        programs.enter(None)
        kernel.last_cores = cores
        LAST.update(kernel=kernel.fn.__name__, cores=cores)
        LAUNCHES.append({"kernel": kernel.fn.__name__, "target": nc0.target, **programs.summary(),
                         "instructions": sum(len(c.stream) for c in cores), "ok": not errors})
        live.executed(not errors, "model" if errors and isinstance(errors[0], TrnsimError) else "generic")
    if errors:
        error = errors[0]
        errors.clear()
        try:
            raise error
        finally:
            error = None  # the traceback holds this frame: no cycle through it keeps the launch alive
    if not values:
        return None
    for orig, v, k in backs:  # inputs the kernel wrote go back to the caller's arrays
        if v.alloc.memory.version == 0:
            continue  # never written
        if isinstance(orig, np.ndarray) and orig.flags.writeable:
            np.copyto(orig, v.array().reshape(orig.shape))
        elif k == "torch":
            orig.copy_(_from_numpy(v.array().copy(), "torch").reshape(orig.shape))
    # A framework launch of one core may hand back an nl.hbm tensor (the NKI tutorials' PyTorch and JAX drivers
    # do: nki/guides/tutorials/kernel-optimization.rst); otherwise outputs are shared_hbm (nki/migration, 0.3.0).
    framework_hbm = sink["kind"] != "numpy" and len(cores) == 1
    return _outputs(programs.result(results[0]), sink["kind"], [v for _, v, _ in backs],
                    hbm_ok=programs.hbm_ok or framework_hbm,
                    unwritten=kernel.options.get("unwritten_output"))


def _outputs(res, kind, inputs=(), hbm_ok=False, unwritten=None):
    """Returned tensors as arrays of the caller's kind.

    The current API returns only shared_hbm tensors (or inputs written in place); the beta API also returns
    tensors allocated in `nl.hbm` (`hbm_ok`). Elements the kernel never wrote are what the hardware returns
    (whatever the memory held): a warning naming them, or an `UninitializedError` where `unwritten` (the
    kernel option `unwritten_output=`, else TRNSIM_UNWRITTEN_OUTPUT) is "error".
    """
    if unwritten is None:
        unwritten = flags.UNWRITTEN_OUTPUT.value()
    if unwritten not in ("warn", "error"):
        raise ConfigError(f"unwritten_output={unwritten!r}: it is 'warn' or 'error'")
    if isinstance(res, View):
        if res.buffer != "shared_hbm" and not (hbm_ok and res.buffer.endswith("hbm")) and not any(
                res.alloc is v.alloc for v in inputs):
            raise MemorySpaceError(f"returned tensor {res.name!r} is in {res.buffer}; kernel outputs must be "
                                   f"allocated with buffer=nl.shared_hbm (or be an input written in place)",
                                   res.alloc.location)
        if res.poisoned():
            _unwritten_output(res, unwritten)
        return _from_numpy(np.ascontiguousarray(res.array()), kind)  # the launch is over: its HBM is the caller's
    if isinstance(res, (tuple, list)):
        return type(res)(_outputs(r, kind, inputs, hbm_ok, unwritten) for r in res)
    if isinstance(res, dict):
        return {k: _outputs(v, kind, inputs, hbm_ok, unwritten) for k, v in res.items()}
    return res


def _unwritten_output(res: View, unwritten: str):
    """Name the never-written elements of a returned tensor: warn (the hardware returns garbage there) or raise."""
    m = res.mask()
    idx = np.argwhere(m)
    rows = np.unique(idx[:, 0]) if idx.ndim == 2 and idx.shape[1] else np.array([0])
    sample = ", ".join(str(list(map(int, i))) for i in idx[:3])
    msg = (f"returned tensor {res.name!r} holds never-written elements ({int(m.sum())} of {m.size}; rows "
           f"{rows[:8].tolist()}{' ...' if rows.size > 8 else ''}, e.g. {sample}); the hardware returns whatever "
           f"its memory held there")
    if unwritten == "error":
        raise UninitializedError(msg, res.alloc.location)
    warnings.warn(f"{msg} at {res.alloc.location}", UninitializedWarning, stacklevel=4)

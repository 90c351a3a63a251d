"""Tile lifetimes as the compiler sees them: a tile made in a loop iteration is dead when it ends.

The compiler scopes a tensor to the block that made it (a loop body, one iteration at a time) and frees
it after its last use; Python would keep it while a name still holds it (until the name is rebound in
the next iteration, after the new tile is made). `iterations` runs a loop's iterations so that the
tensors an iteration makes are held (memory.Memory.held) through it and the next one, even where the
program drops them, so consecutive iterations use different buffers; when an iteration ends they expire
(memory.py). Held and expired bytes are taken back, oldest first, whenever an allocation would not fit
otherwise: the number of buffers shrinks to what fits, down to one. A tile used after its bytes went
elsewhere is refused with OutOfScopeError: on hardware it would read another tensor's data.

Before any of that, when an allocation would not fit, the kernel's names that its code never reads again
are dropped (`drop_dead_names`): the compiler frees a tile at its last use, in a loop body or not. And since
the compiler traces a loop body once, what the body's Python decides once (`traced`) is the same in
every iteration.
"""
from __future__ import annotations

import bisect
import sys
import weakref

from trnsim.core.errors import inside


class Loop:
    """One kernel loop while it runs: whether it is in its first iteration, (outermost loops) what that
    iteration's trace decided (see `traced`), and, once the core spills, when each SBUF tile was used in
    the current and the previous iteration (see `next_use`)."""

    __slots__ = ("first", "trace", "uses", "last", "length")

    def __init__(self):
        self.first, self.trace = True, {}
        self.uses: dict = {}  # tile key -> steps of this iteration that used it (NeuronCore.issue)
        self.last: dict | None = None  # the same for the previous iteration
        self.length = 0  # instructions in the previous iteration


class Iteration:
    """The on-chip tensors made while one loop iteration runs (weak references: the memory holds them)."""

    __slots__ = ("allocs", "loop", "counts", "step", "made")

    def __init__(self, loop: Loop | None = None):
        self.allocs: list[weakref.ref] = []
        self.loop = loop or Loop()
        self.counts: dict = {}  # site -> how many times `traced` was asked there in this iteration
        self.step = 0  # instructions issued in this iteration so far
        self.made: dict = {}  # source line -> tiles allocated there in this iteration

    def add(self, a) -> None:
        self.allocs.append(weakref.ref(a))
        a.memory.held[a.id] = a
        n = self.made[a.location] = self.made.get(a.location, 0) + 1
        a.site, a.scope = (a.location, n), self  # the same tile of every iteration has the same site

    def expire(self) -> list:
        """Mark the tensors still live as expired; return them, for the loop to release after the next one."""
        held = []
        for ref in self.allocs:
            a = ref()
            if a is None or a.evicted or a.expired or a.id not in a.memory.live:
                continue
            a.expired = True
            a.memory.expired[a.id] = a
            held.append(a)
        return held


def iterations(nc, indices):
    """Yield `indices`, one Iteration scope each on core `nc`; the previous iteration's tensors stay held
    through the next one (as its buffers), then are released to the program's references."""
    prev: list = []
    loop = Loop()
    try:
        for n, i in enumerate(indices):
            loop.first = n == 0
            scope = Iteration(loop)
            nc.scopes.append(scope)
            try:
                yield i
            finally:
                scopes = nc.scopes
                if scopes and scopes[-1] is scope:  # the usual case: the innermost scope ends
                    scopes.pop()
                elif scope in scopes:
                    scopes.remove(scope)
                if prev:
                    _release(prev)
                prev = scope.expire() if scope.allocs else []
                if loop.uses:
                    loop.last, loop.uses, loop.length = loop.uses, {}, scope.step
    finally:
        _release(prev)


def note_uses(scope: Iteration, allocs) -> None:
    """Record that the SBUF tiles `allocs` are used at this step of the innermost loop iteration."""
    uses, step = scope.loop.uses, scope.step
    for a in allocs:
        key = a.site if getattr(a, "scope", None) is scope else a.id
        uses.setdefault(key, []).append(step)


def next_use(scope: Iteration, a) -> float | None:
    """Instructions until tile `a` is used next, predicted from the previous iteration of the innermost loop:
    the compiler sees a loop body whole, and iterations repeat it. A tile made in this iteration stands for
    the one made at the same site in the last; once its uses there are past, it is dead (inf). None: no
    previous iteration to go by."""
    loop = scope.loop
    if loop.last is None:
        return None
    mine = getattr(a, "scope", None) is scope
    steps = loop.last.get(a.site if mine else a.id)
    if not steps:
        return float("inf")
    i = bisect.bisect_right(steps, scope.step)
    if i < len(steps):
        return steps[i] - scope.step
    return float("inf") if mine else steps[0] + loop.length - scope.step


def _release(allocs) -> None:
    for a in allocs:
        a.memory.held.pop(a.id, None)


def traced(nc, site: str, make):
    """What the compiler decides once per loop body, the same in every iteration: the compiler traces a
    loop body once, so Python code in it (a counter bumped beside a tensor declaration, an allocation
    function built from it) runs once, and every iteration uses that trace's result. trnsim runs each
    iteration, so the n-th request at `site` in an iteration gets what `make()` gave the n-th request at
    that site in the first iteration of every enclosing loop (nki_direct_allocation_guide.rst: the
    compiler evaluates an allocation function statically, once per logical tile)."""
    if not nc.scopes:
        return make()
    inner = nc.scopes[-1]
    n = inner.counts[site] = inner.counts.get(site, 0) + 1
    trace, key = nc.scopes[0].loop.trace, (site, n)
    if all(s.loop.first for s in nc.scopes) or key not in trace:
        trace[key] = make()
    return trace[key]


# -- names the kernel never reads again ------------------------------------------------------------------------
# The compiler frees a tile after its last use; Python keeps it while a name holds it. When an allocation does
# not fit, the kernel's names that its code never reads again are dropped (set to None), so tiles held only by
# them are freed by reference counting, exactly where the compiler's liveness would have freed them. Which
# names are dead follows from the kernel's bytecode: a backward dataflow over its control flow graph.

_UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP",
                  "JUMP_NO_INTERRUPT", "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
_dead_cache: dict = {}
# Front ends that keep tiles for a while of their own (to re-issue a call into an assignment) register here
# how to let go of them when memory is short.
releasers: list = []


def _live_after(code) -> tuple[list[int], list[frozenset]]:
    """The instruction offsets of `code` and, for each, the fast locals a later instruction may read."""
    live = _dead_cache.get(code)
    if live is not None:
        return live
    import dis
    ins = list(dis.get_instructions(code))
    at = {i.offset: n for n, i in enumerate(ins)}
    succ: list[list[int]] = []
    for n, i in enumerate(ins):
        s = [] if i.opname in _UNCONDITIONAL or n + 1 == len(ins) else [n + 1]
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            if isinstance(i.argval, int) and i.argval in at:
                s.append(at[i.argval])
        succ.append(s)
    for e in getattr(dis.Bytecode(code), "exception_entries", []):  # a handler may read what its block set
        for off in range(e.start, e.end, 2):
            if off in at and e.target in at:
                succ[at[off]].append(at[e.target])
    uses, defs = [], []
    for i in ins:
        names = i.argval if isinstance(i.argval, tuple) else (i.argval,)
        u = d = ()
        if "FAST" in i.opname and all(isinstance(x, str) for x in names):
            if i.opname.startswith("STORE_FAST_LOAD_FAST"):
                d, u = names[:1], names[1:]
            elif i.opname.startswith(("STORE", "DELETE")):
                d = names
            else:
                u = names
        uses.append(frozenset(u))
        defs.append(frozenset(d))
    live_in = [frozenset()] * len(ins)
    out = [frozenset()] * len(ins)
    changed = True
    while changed:
        changed = False
        for n in range(len(ins) - 1, -1, -1):
            o = frozenset().union(*(live_in[s] for s in succ[n])) if succ[n] else frozenset()
            li = uses[n] | (o - defs[n])
            if li != live_in[n] or o != out[n]:
                live_in[n], out[n], changed = li, o, True
    live = _dead_cache[code] = ([i.offset for i in ins], out)
    return live


def drop_dead_names() -> bool:
    """Set to None the locals of the running kernel's frames (the user's frames nearest the caller) that
    their code never reads again, after the front ends let go of what they keep. True if anything may
    have been freed."""
    for release in releasers:
        release()
    frame, seen, dropped = sys._getframe(0), False, bool(releasers)
    while frame is not None:
        if inside(frame.f_code.co_filename) and seen:
            break  # the launch that called the kernel (front ends run as Python): beyond it is the caller's
        if not inside(frame.f_code.co_filename):
            seen = True
            dropped |= _drop(frame)
        frame = frame.f_back
    return dropped


def read_later(obj) -> bool:
    """Whether a local of the running kernel's frames holds `obj` under a name its code reads again."""
    frame, seen = sys._getframe(1), False
    while frame is not None:
        if inside(frame.f_code.co_filename):
            if seen:
                return False  # the launch that called the kernel: beyond it is the caller's
        else:
            seen = True
            code = frame.f_code
            names = [k for k, v in frame.f_locals.items() if v is obj]
            if names:
                table = _live_after(code)
                at = bisect.bisect_right(table[0], frame.f_lasti) - 1
                if at < 0 or any(k in table[1][at] or k in code.co_cellvars for k in names):
                    return True
        frame = frame.f_back
    return False


def _drop(frame) -> bool:
    code = frame.f_code
    table = _live_after(code)
    at = bisect.bisect_right(table[0], frame.f_lasti) - 1  # f_lasti may point into the call's inline caches
    if at < 0:
        return False
    live = table[1][at]
    cells = set(code.co_cellvars) | set(code.co_freevars)
    names = frame.f_locals
    dead = [k for k in code.co_varnames if k in names and names[k] is not None and k not in live and k not in cells]
    if not dead:
        return False
    for k in dead:
        names[k] = None
    if sys.version_info < (3, 13):  # the snapshot dict is written back to the frame's fast locals
        import ctypes
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
    return True

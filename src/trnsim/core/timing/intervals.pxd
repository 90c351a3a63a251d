# Declarations for the compiled build of intervals.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make the map an extension type holding C arrays (arrays.pxd, cimported in arrays.py's place)
# and type some locals.
cimport cython
from trnsim.core.timing cimport arrays
from trnsim.core.timing.arrays cimport ints, reals

cdef Py_ssize_t NOTHING, KEPT


@cython.final
cdef class IntervalMap:
    cdef public Py_ssize_t n, cap, width, hint
    cdef ints lo
    cdef ints writer
    cdef ints owner
    cdef ints track
    cdef ints count
    cdef ints readers

    @cython.locals(out=list, readers=list, i=Py_ssize_t, k=Py_ssize_t)
    cpdef list segments(self)


@cython.final
cdef class Waits:
    cdef public Py_ssize_t n, cap
    cdef ints at

    @cython.locals(out=list, k=Py_ssize_t)
    cpdef list found(self)


@cython.final
cdef class Ends:
    cdef public Py_ssize_t n, cap
    cdef ints track
    cdef reals end


@cython.locals(k=Py_ssize_t)
cpdef ended(Ends ends, Py_ssize_t track, double end)


@cython.final
cdef class Latest:
    cdef public Py_ssize_t cap
    cdef ints event
    cdef reals end


@cython.locals(cap=Py_ssize_t, n=Py_ssize_t, k=Py_ssize_t, event=ints)
cpdef reach(Latest latest, Py_ssize_t tile)


@cython.final
cdef class Pending:
    cdef public Py_ssize_t n, cap
    cdef public list maps
    cdef ints at


@cython.locals(i=Py_ssize_t, k=Py_ssize_t, first=Py_ssize_t, after=Py_ssize_t, nothing=bint)
cpdef bint touch(IntervalMap m, Py_ssize_t lo, Py_ssize_t hi, bint w, Py_ssize_t tile, Py_ssize_t eng, bint dma,
                 Py_ssize_t index, bint accumulated, Waits waits, list fed, Pending pending)

@cython.locals(k=Py_ssize_t, maps=list, at=ints)
cpdef noted(Pending pending, Py_ssize_t index, double mine, Py_ssize_t eng, Ends ends)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, edge=Py_ssize_t)
cpdef producers(IntervalMap m, Py_ssize_t lo, Py_ssize_t hi, bint w, Py_ssize_t tile, Py_ssize_t eng, bint dma,
                Waits waits, list fed)

@cython.locals(i=Py_ssize_t, j=Py_ssize_t, k=Py_ssize_t)
cpdef note(IntervalMap m, Py_ssize_t lo, Py_ssize_t hi, bint w, Py_ssize_t index, Py_ssize_t tile, Py_ssize_t eng,
           bint accumulated, double mine, Ends ends)

@cython.locals(i=Py_ssize_t, j=Py_ssize_t)
cpdef forget(IntervalMap m, Py_ssize_t lo, Py_ssize_t hi)

@cython.locals(owner=Py_ssize_t, writer=Py_ssize_t, track=Py_ssize_t, base=Py_ssize_t, k=Py_ssize_t, at=ints,
               n=Py_ssize_t)
cdef void _wait(IntervalMap m, Py_ssize_t i, bint w, Py_ssize_t tile, Py_ssize_t eng, bint dma, Waits waits,
               list fed)

cpdef room(Waits waits, Py_ssize_t n)

@cython.locals(at=ints, n=Py_ssize_t, k=Py_ssize_t)
cpdef add(Waits waits, Py_ssize_t x)

cdef void _write(IntervalMap m, Py_ssize_t i, Py_ssize_t index, Py_ssize_t tile, Py_ssize_t eng,
                 bint accumulated) noexcept

@cython.locals(base=Py_ssize_t, n=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t, track=Py_ssize_t, theirs=double, readers=ints)
cdef void _read(IntervalMap m, Py_ssize_t i, Py_ssize_t index, Py_ssize_t tile, double mine, Py_ssize_t eng,
               Ends ends)

cdef void _empty(IntervalMap m, Py_ssize_t i) noexcept

@cython.locals(i=Py_ssize_t, edge=Py_ssize_t)
cdef Py_ssize_t _cut(IntervalMap m, Py_ssize_t x) except -1

@cython.locals(n=Py_ssize_t, width=Py_ssize_t)
cdef void _split(IntervalMap m, Py_ssize_t i, Py_ssize_t x)

@cython.locals(n=Py_ssize_t, width=Py_ssize_t)
cdef void _merge(IntervalMap m, Py_ssize_t i, Py_ssize_t j) noexcept

@cython.locals(cap=Py_ssize_t)
cdef void _grow(IntervalMap m)

@cython.locals(width=Py_ssize_t, old=ints, wide=ints, i=Py_ssize_t, k=Py_ssize_t)
cdef void _widen(IntervalMap m)


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, y=double)
cpdef Py_ssize_t right(list a, double x)


@cython.locals(first=Py_ssize_t, after=Py_ssize_t)
cpdef bint covers(IntervalMap m, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi) noexcept


@cython.locals(b=ints, lo=Py_ssize_t, hi=Py_ssize_t, i=Py_ssize_t, mid=Py_ssize_t, edge=Py_ssize_t)
cpdef Py_ssize_t seek(IntervalMap m, Py_ssize_t x) noexcept

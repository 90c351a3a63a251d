# Declarations for the compiled build of scheduler.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
import cython
from trnsim.core.isa.registry cimport Record
from trnsim.core.timing.intervals cimport IntervalMap

@cython.final
cdef class Event:
    cdef public object index, rec, track, start, end, deps, blocker, flops, pieces, model_flops


@cython.final
cdef class Scheduler:
    cdef public object spec, t, rules, tl, warm_since, regions, plans
    cdef public dict free, last, queue_of, maps, cells, high, psum_tiles, tile_last, alone
    cdef public list dma_busy, queue_end, queue_last, eng_of, end_of
    cdef public set narrow
    cdef public double tensor_end
    cdef public object psum_high
    cdef public bint chained

    @cython.locals(deps=dict, rest=list, eng_of=list, end_of=list, high=dict, narrow=set, dma=bint,
                   at=Py_ssize_t, i=Py_ssize_t, n=Py_ssize_t, b=list, v=list, m=IntervalMap, readers=dict,
                   cells=tuple, w=bint)
    cpdef tuple _deps(self, str eng, tuple plan, list tiles, bint fresh, Py_ssize_t index, object accumulated)

    @cython.locals(narrow=set, i=Py_ssize_t, j=Py_ssize_t, k=Py_ssize_t, b=list, v=list, m=IntervalMap, cells=tuple,
                   w=bint, r=dict)
    cpdef _record(self, list accesses, list tiles, str eng, Py_ssize_t index, object accumulated)

    @cython.locals(index=Py_ssize_t, q=Py_ssize_t, deps=dict, rest=list, plans=dict, ready=double, sem=double,
                   blocker=Py_ssize_t, end=double, tiles=list, psum=tuple, memo=dict, last=dict, k=object, ev=Event)
    cpdef step(self, Record rec)

    @cython.locals(free=double, start=double, end=double, flops=double, model=double)
    cpdef _compute(self, Record rec, w, str eng, Py_ssize_t index, double ready, Py_ssize_t blocker, dict memo)

    @cython.locals(go=double, turn=double, end=double, start=double, pieces=list, busy=list, s=double, f=double,
                   dur=double, e=Py_ssize_t, tl=object)
    cpdef _dma(self, Record rec, w, Py_ssize_t index, double ready, object blocker, Py_ssize_t q, dict memo)


@cython.locals(starts=list, ends=list, owner=list, i=Py_ssize_t, n=Py_ssize_t, t=double, take=double, left=double,
               gap_end=double, segs=list, s=double, f=double)
cpdef tuple _place(tuple busy, double at, double dur, Py_ssize_t index)


@cython.locals(i=Py_ssize_t)
cpdef _book(list starts, list ends, list owner, double s, double f, Py_ssize_t index)


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t _right(list a, x)

# Declarations for the compiled build of scheduler.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
import cython
from trnsim.core.timing.arrays cimport ints, reals
from trnsim.core.isa.registry cimport Record
from trnsim.core.timing.intervals cimport (Ends, IntervalMap, Latest, Pending, Waits, add, ended, forget, note, noted,
                                           producers, reach, right as _right, room, touch)

cdef double _FOREVER, _SLACK
cdef Py_ssize_t DMA_TRACK, _TENSOR
cdef tuple _TRACK_NAME


@cython.final
cdef class Event:
    cdef public double start, end
    cdef public object index, rec, track
    cdef public Py_ssize_t nd, d0, d1, d2
    cdef public object more, blocker, flops, parts, model_flops


@cython.final
cdef class Access:
    cdef public object cells, memory, buffer, key
    cdef public Py_ssize_t lo, hi, seg
    cdef public bint w


@cython.final
cdef class Scheduler:
    cdef public object spec, t, rules, tl
    cdef public dict queue_of, maps, cells, high, psum_tiles, alone, transfers, regions, plans, like, near
    cdef public list free, last, dma_names, dma_busy, queue_end, queue_last, busy, fed
    cdef public list numbers, known, events, dma_lead, piece_engine, piece_start, piece_end, piece_run
    cdef public tuple pe
    cdef public Waits waits, rest, tiles
    cdef public Ends ends
    cdef public Pending pending
    cdef public Latest tile_last
    cdef public set narrow
    cdef public double sem, warmup_start, warmup
    cdef public Py_ssize_t psum_high, psum_bank, psum_banks, dma_version

    @cython.locals(k=Py_ssize_t, waits=Waits, fed=list, pending=Pending, rest=Waits, high=dict, narrow=set, dma=bint,
                   last=Latest,
                   at=Py_ssize_t, m=IntervalMap, cells=tuple, w=bint, lo=Py_ssize_t, hi=Py_ssize_t, tile=Py_ssize_t,
                   a=Access, found=bint)
    cpdef Waits _deps(self, Py_ssize_t eng, tuple plan, Waits tiles, bint fresh, Py_ssize_t index, bint accumulated)

    @cython.locals(placed=list, depth=Py_ssize_t, footprint=Py_ssize_t, was=Py_ssize_t, last=Latest)
    cpdef _psum_buffer(self, tuple at, Py_ssize_t byte_hi, tile, Waits waits)

    @cython.locals(narrow=set, ends=Ends, m=IntervalMap, cells=tuple, w=bint, lo=Py_ssize_t,
                   hi=Py_ssize_t, tile=Py_ssize_t, at=Py_ssize_t, a=Access, k=Py_ssize_t)
    cpdef _record(self, Waits accesses, tuple plan, Waits tiles, Py_ssize_t eng, Py_ssize_t index, bint accumulated,
                  double end)

    @cython.locals(q=Py_ssize_t, eng=Py_ssize_t, waits=Waits, ends=Ends, end_of=reals, track_of=ints, rest=Waits,
                   ready=double, sem=double, end=double, tiles=Waits, of=ints, place=tuple, psum=tuple, memo=list,
                   last=Latest, k=Py_ssize_t, ev=Event, tile=Py_ssize_t, me=Py_ssize_t, done=double, index=object,
                   placed=dict, attrs=dict, idx=Py_ssize_t,
                   track=Py_ssize_t, latest=Py_ssize_t, p=tuple, known=list, at=Py_ssize_t, seen=tuple, fresh=bint,
                   ordered=bint, issued=Py_ssize_t, numbers=list)
    cpdef step(self, Record rec)

    @cython.locals(plans=dict, known=list, at=Py_ssize_t, issued=Py_ssize_t, fresh=bint)
    cpdef tuple _entry(self, Record rec, dict attrs)

    @cython.locals(starts=list, ends=list, owner=list, warms=list, fed=list, n=Py_ssize_t, i=Py_ssize_t, tensor=bint,
                   ramped=bint, start=double, end=double, gap=double, gap_end=double, dur=double, base=double,
                   warm=double, dependent=bint, at=double, done=object,
                   free=double)
    cpdef _compute(self, Record rec, w, Py_ssize_t eng, object index, double ready, object blocker, list memo,
                   bint ordered)

    @cython.locals(starts=list, events=list, bases=list, warms=list, ends=Ends, k=Py_ssize_t, j=Py_ssize_t,
                   half=double, s=double)
    cpdef _warm_up(self, double start, double end, object index, double base, double warm)

    @cython.locals(starts=list, ends=list, owner=list, fence=list, i=Py_ssize_t, was=double)
    cpdef _shorten(self, object e, double start, double end)

    @cython.locals(ramp=double)
    cpdef double _throttle(self, double start, double idle_since, double warm_since)

    @cython.locals(like=tuple, seen=tuple, plan=tuple, got=tuple, near=tuple, lows=list, attrs=dict)
    cpdef tuple _fresh(self, Record rec, bint numbered)

    @cython.locals(go=double, turn=double, end=double, start=double, pieces=list, busy=list, s=double, f=double,
                   dur=double, e=Py_ssize_t, k=Py_ssize_t, got=list, split=list, heads=list, of=list, placed=list,
                   ends=list, lasts=list, engines=list, starts=list, finishes=list, at=double, x=tuple)
    cpdef _dma(self, Record rec, w, object index, double ready, object blocker, Py_ssize_t q, list memo)

    @cython.locals(lead=list, busy=list, n=Py_ssize_t, e=Py_ssize_t, k=Py_ssize_t, first=dict, new=list, split=list,
                   heads=list, of=list, at=dict)
    cpdef _regroup(self, list got)


cdef Py_ssize_t _NUMBERS_CAP


cpdef _number(list numbers, Py_ssize_t n)


@cython.locals(ev=Event)
cdef Event _event(index, rec, track, double start, double end, blocker, flops, model, pieces)


@cython.locals(a=Access)
cdef Access _access(cells, memory, Py_ssize_t lo, Py_ssize_t hi, bint w, buffer, key)


@cython.locals(at=ints, n=Py_ssize_t, a=Py_ssize_t, b=Py_ssize_t, c=Py_ssize_t, k=Py_ssize_t, got=list)
cpdef void _in_order(Waits waits, Event ev)


@cython.locals(a=dict)
cpdef tuple _queue_site(Record rec)


@cython.locals(key=list, lows=list)
cpdef tuple _like(Record rec)


cpdef tuple _nearby(Record rec, tuple seen)


@cython.locals(a=Record, names=tuple, placed=tuple, head=tuple, pb=dict, lows=list, k=Py_ssize_t, p=tuple, q=tuple, place=tuple,
               was=tuple, span=tuple, other=tuple)
cpdef list _alike(tuple near, Record b)


@cython.locals(entries=list, plan=tuple, k=Py_ssize_t, shift=Py_ssize_t, a=Access)
cpdef tuple _moved(tuple got, list was, list lows, list sizes)


@cython.locals(e=Py_ssize_t, moved=list)
cpdef list _by_engine(split, Py_ssize_t n)


@cython.locals(last=double, after=double, start=double, finish=double)
cdef void _occupy(list starts, list ends, list owner, Py_ssize_t i, double s, f, object index)


@cython.locals(starts=list, ends=list, owner=list, i=Py_ssize_t, n=Py_ssize_t, t=double, take=double, left=double,
               gap_end=double, segs=list, s=double, f=double)
cpdef tuple _place(tuple busy, double at, double dur, object index)


cpdef _book(list starts, list ends, list owner, double s, double f, object index)


@cython.locals(last=double, after=double)
cpdef _book_at(list starts, list ends, list owner, Py_ssize_t i, double s, double f, object index)


@cython.locals(n=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t, a=Access, b=Access)
cpdef bint _apart(tuple plan)


@cython.locals(s=Scheduler, i=Py_ssize_t, lo=Py_ssize_t, chunk=Py_ssize_t)
cpdef replay(stream, spec, tspec, on_chunk=*)

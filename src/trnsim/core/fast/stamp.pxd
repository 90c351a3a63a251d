# Declarations for the compiled build of stamp.py (trnsim/compiled.py): the source is the meaning, these only
# type the locals of the loops that run once per stamped record.
import cython
from trnsim.core.isa.registry cimport Record
from trnsim.core.fast.memo cimport Verdicts
from trnsim.core.fast.views cimport layout_number

# id(x) as CPython's builtin computes it (the object's address as an int), called as the C function it is: the tables
# that find placements, dicts and records by identity ask it several times per record (a builtin call costs more)
cdef extern from "Python.h":
    object id "PyLong_FromVoidPtr" (object)


@cython.locals(stream=list, length=cython.Py_ssize_t, p=cython.Py_ssize_t, it=cython.Py_ssize_t,
               phase=cython.Py_ssize_t, step=cython.Py_ssize_t, j=cython.Py_ssize_t, base=cython.Py_ssize_t,
               recs=list, steps=list, rec=Record, out=Record, moves=tuple, moved=dict, placed=dict, move=tuple, q=tuple,
               verdicts=Verdicts, periods=cython.Py_ssize_t, counted=cython.Py_ssize_t, s=cython.Py_ssize_t, onto=list,
               notes=list, now=list, movers=list)
cpdef _stamp(nc, t)


@cython.locals(sig=tuple, out=list, pos=cython.Py_ssize_t, layout=tuple, steps=tuple, numbered=dict, names=dict,
               serials=dict, place=tuple)
cpdef _moving_signature(Verdicts verdicts, Record rec, list moves)


cpdef bint _made_before(tuple place, tuple fresh)


@cython.locals(place=tuple, tile=cython.Py_ssize_t)
cpdef tuple _moved(tuple p, Py_ssize_t step, Py_ssize_t dtile, Py_ssize_t doff, Py_ssize_t dpoff)
@cython.locals(span=tuple, o=cython.Py_ssize_t, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t)
cpdef tuple _at(tuple p, tuple place, Py_ssize_t d, Py_ssize_t dp)


@cython.locals(key=list, made=list, hit=tuple, memo_key=tuple, moving=tuple, memo=dict, layouts=dict, layout=tuple,
               pos=cython.Py_ssize_t, doff=cython.Py_ssize_t, dpoff=cython.Py_ssize_t)
cpdef _number(Verdicts verdicts, tuple sig, Py_ssize_t step, like)


@cython.locals(runs=list, length=cython.Py_ssize_t, i=cython.Py_ssize_t, j=cython.Py_ssize_t, k=cython.Py_ssize_t,
               x=Record, y=Record, z=Record, px=tuple, py=tuple, pz=tuple, moves=list, ahead=list,
               move=tuple, known=tuple, counts=dict, starts=list, xs=list, ys=list, zs=list, xp=dict, yp=dict, zp=dict,
               sbuf_fresh=cython.Py_ssize_t, psum_fresh=cython.Py_ssize_t, period=tuple, paired=dict,
               slots=list, given=tuple, moves_of=list)
cpdef _template(nc, list snaps, Py_ssize_t a, Py_ssize_t p, Py_ssize_t end)


@cython.locals(qx=tuple, qz=tuple, tile=cython.Py_ssize_t, sbuf=bint, made=bint, dtile=cython.Py_ssize_t,
               doff=cython.Py_ssize_t, dpoff=cython.Py_ssize_t, last=tuple, move=tuple, entry=tuple,
               ox=cython.Py_ssize_t, pox=cython.Py_ssize_t, oy=cython.Py_ssize_t, poy=cython.Py_ssize_t,
               tz=cython.Py_ssize_t, oz=cython.Py_ssize_t, poz=cython.Py_ssize_t)
cpdef tuple _paired(tuple known, Py_ssize_t k, name, tuple px, tuple py, tuple pz, Py_ssize_t p,
                    Py_ssize_t sbuf_fresh, Py_ssize_t psum_fresh, tuple period, list slots)


@cython.locals(live=list, rank=dict, pos=dict, out=list, tiles=list, held=list, expired=list, i=cython.Py_ssize_t)
cpdef tuple _state(nc)


# the keys' arithmetic, asked once per moving part of a template or a stamp: called as C functions
@cython.locals(ks=tuple, i=cython.Py_ssize_t, sl=slice)
cpdef bint _inside(key, tuple shape)
cpdef bint _fits(key, tuple shape)
cpdef bint _even(tuple step)
@cython.locals(ks=tuple, out=list, i=cython.Py_ssize_t, sl=slice)
cpdef _key_at(key, tuple step, Py_ssize_t t)
@cython.locals(ta=tuple, tb=tuple, out=list, i=cython.Py_ssize_t, sx=slice, sy=slice)
cpdef _key_step(ka, kb)
cpdef _bound_step(u, w)
@cython.locals(out=dict, i=cython.Py_ssize_t, e=tuple, k=tuple)
cpdef dict _parts(list watched, lo, hi, dict offsets)
@cython.locals(a=cython.Py_ssize_t, p=cython.Py_ssize_t, i=cython.Py_ssize_t, j=cython.Py_ssize_t, left=cython.Py_ssize_t,
               unknown=bint, offsets=dict, sliced=list, proven=dict, here=dict, ahead=dict, moves=tuple, px=tuple, py=tuple,
               wa=tuple, wb=tuple, rec=Record, pys=list, m=cython.Py_ssize_t, entry=tuple, pair=tuple)
cpdef _straight(t, list snaps, Py_ssize_t n)
cpdef _onto(Record rec, Py_ssize_t start)
@cython.locals(out=list, notes=list, keys=dict, phase=cython.Py_ssize_t, j=cython.Py_ssize_t)
cpdef list _watched(t)
@cython.locals(q=tuple, layout=tuple, single=bint, parts=tuple, at=cython.Py_ssize_t)
cpdef _watch(list watched, tuple notes, Py_ssize_t it, dict placed)
@cython.locals(ks=tuple, out=list, i=cython.Py_ssize_t, sl=slice)
cpdef tuple _key_parts(key, tuple step)
@cython.locals(out=list, part=tuple, kind=cython.Py_ssize_t, a=cython.Py_ssize_t, da=cython.Py_ssize_t,
               b=cython.Py_ssize_t, db=cython.Py_ssize_t)
cpdef _key_from(tuple parts, bint single, Py_ssize_t t)
@cython.locals(places=list, at=dict, ks=list, slot=tuple, px=tuple, k=cython.Py_ssize_t, place=tuple, pair=tuple,
               tile=cython.Py_ssize_t, dtile=cython.Py_ssize_t)
cpdef tuple _movers(list slots)
@cython.locals(slots=list, ks=list, places=list, moved=list, out=list, pair=tuple, place=tuple, dtile=cython.Py_ssize_t,
               slot=tuple, px=tuple, k=cython.Py_ssize_t, doff=cython.Py_ssize_t, dpoff=cython.Py_ssize_t,
               tile=cython.Py_ssize_t, n=cython.Py_ssize_t, i=cython.Py_ssize_t)
cpdef list _moved_slots(tuple movers, Py_ssize_t step)


# foretelling an iteration (`_foretold`): once per record of the period, its placements and its tiles
@cython.locals(out=list, moved=dict, moving=list, j=cython.Py_ssize_t, u=Record, v=Record, x=Record, z=Record,
               up=dict, vp=dict, xp=dict, placed=dict, pu=tuple, pv=tuple, px=tuple, pz=tuple, pair=tuple, pairs=dict,
               got=tuple, still=bint, ou=cython.Py_ssize_t, ov=cython.Py_ssize_t, qu=cython.Py_ssize_t,
               qv=cython.Py_ssize_t, given=list, slots=list, moves=list, k=cython.Py_ssize_t, entry=tuple, hit=tuple,
               nexts=list, pzs=list)
cpdef _period_on(list stream, Py_ssize_t lo, Py_ssize_t mid, Py_ssize_t at, Py_ssize_t base, Py_ssize_t length,
                 tuple fresh, tuple later, tuple dtiles, Py_ssize_t p)
@cython.locals(ta=cython.Py_ssize_t, tb=cython.Py_ssize_t)
cpdef _made_in(tuple qa, tuple qb, tuple fresh, tuple later, tuple dtiles)
@cython.locals(offsets=set, out=dict, i=cython.Py_ssize_t, e=tuple, k=tuple)
cpdef dict _picked(list watched, Py_ssize_t lo, Py_ssize_t hi, set wanted)
@cython.locals(lines=dict, reads_any=set, i=cython.Py_ssize_t, k=cython.Py_ssize_t, m=cython.Py_ssize_t,
               w=cython.Py_ssize_t, n=cython.Py_ssize_t, rec=Record, reads=list, same=list, q=tuple, writes=dict,
               seen=list, found=bint, end=cython.Py_ssize_t, pure=bint, placed=dict)
cpdef bint _forgotten(list window, list ends, list fresh)
@cython.locals(dst=tuple, q=tuple)
cpdef bint _hoistable(Record rec, tuple fresh)


# a later run recorded as a kept one (`_replayed`): once per record of the kept run, and per placement and place
@cython.locals(entries=dict, rho=dict, i=cython.Py_ssize_t, x=tuple, y=tuple, plan=tuple, places=list,
               ours=cython.Py_ssize_t, qs=list, dicts=list, attrs=list, rows=list, marks=list, fresh=tuple, shift=tuple,
               watching=bint, renamed=list, place=tuple, moved=list, q=tuple, k=cython.Py_ssize_t, placements=list,
               placed=dict, names=tuple, new=dict, own=list, a=dict, out=list, records=list, stream=list,
               base=cython.Py_ssize_t, lo=cython.Py_ssize_t, rec=Record, row=tuple, z=Record, notes=list, watched=list,
               e=tuple, mark=tuple, u=tuple, w=tuple, pu=tuple, pw=tuple, total=cython.Py_ssize_t,
               counted=cython.Py_ssize_t, j=cython.Py_ssize_t, lives=tuple, mi=cython.Py_ssize_t, pos=cython.Py_ssize_t)
cpdef bint _replayed(nc, key, snap, inputs, indices)
@cython.locals(got=tuple, tile=cython.Py_ssize_t, k=cython.Py_ssize_t)
cpdef tuple _renamed(tuple place, dict rho, tuple fresh, tuple shift)
@cython.locals(n=cython.Py_ssize_t)
cpdef tuple _with_place(tuple q, tuple place)
@cython.locals(places=list, qs=list, dicts=list, attrs=list, rows=list, marks=list, place_at=dict, q_at=dict,
               dict_at=dict, attrs_at=dict, rec=Record, names=list, q=tuple, u=tuple, w=tuple)
cpdef tuple _plan_of(list records, list watched)
cpdef Py_ssize_t _position(dict at, list items, x) except -1

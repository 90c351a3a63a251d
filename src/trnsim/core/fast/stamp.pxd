# Declarations for the compiled build of stamp.py (trnsim/compiled.py): the source is the meaning, these only
# type the locals of the loops that run once per stamped record.
import cython
from trnsim.core.isa.registry cimport Record
from trnsim.core.fast.memo cimport Verdicts


@cython.locals(stream=list, length=cython.Py_ssize_t, p=cython.Py_ssize_t, it=cython.Py_ssize_t,
               phase=cython.Py_ssize_t, step=cython.Py_ssize_t, j=cython.Py_ssize_t, base=cython.Py_ssize_t,
               recs=list, steps=list, rec=Record, out=Record, moves=tuple, moved=dict, placed=dict, move=tuple, q=tuple,
               verdicts=Verdicts, periods=cython.Py_ssize_t, each=bint, onto=list)
cpdef _stamp(nc, t)


@cython.locals(place=tuple, span=tuple)
cpdef tuple _moved(tuple p, Py_ssize_t step, Py_ssize_t dtile, Py_ssize_t doff, Py_ssize_t dpoff)


@cython.locals(key=list)
cpdef _number(Verdicts verdicts, tuple sig, Py_ssize_t step, like)


@cython.locals(runs=list, length=cython.Py_ssize_t, i=cython.Py_ssize_t, j=cython.Py_ssize_t, k=cython.Py_ssize_t,
               x=Record, y=Record, z=Record, px=tuple, py=tuple, pz=tuple, moves=list, mine=list, ahead=list,
               move=tuple, counts=dict)
cpdef _template(nc, list snaps, Py_ssize_t a, Py_ssize_t p, Py_ssize_t end)


@cython.locals(live=list, rank=dict, pos=dict, out=list, tiles=list, held=list, expired=list, i=cython.Py_ssize_t)
cpdef tuple _state(nc)


# the keys' arithmetic, asked once per moving part of a template or a stamp: called as C functions
cpdef bint _inside(key, tuple shape)
cpdef bint _fits(key, tuple shape)
cpdef bint _even(tuple step)
cpdef _key_at(key, tuple step, Py_ssize_t t)
cpdef _key_step(ka, kb)
cpdef dict _parts(list watched, lo, hi)
cpdef _onto(Record rec, Py_ssize_t start)
cpdef _watch(t, Py_ssize_t phase, Py_ssize_t j, Py_ssize_t it, tuple moves, dict placed)

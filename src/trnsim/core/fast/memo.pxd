# Declarations for the compiled build of memo.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot class an extension type and type some locals.
import cython
from trnsim.core.tensor cimport View
from trnsim.core.memory cimport Allocation
from trnsim.core.isa.registry cimport OpDef
from trnsim.core.fast.views cimport keyed, layout_number

@cython.final
cdef class Verdicts:
    cdef public dict kept, loose
    cdef public object spec
    cdef public list signatures, entries
    cdef public bint shared
    cdef public dict serials, rels

    @cython.locals(s=list)
    cpdef _adopt(self, spec)

    @cython.locals(entry=tuple, hit=tuple, e=tuple)
    cpdef number(self, tuple sig, like)

    cpdef tuple _keep(self, tuple sig, tuple verdict)

    @cython.locals(operands=dict, attrs=dict, hit=tuple, verdict=tuple, changed=dict, t=View)
    cpdef tuple checked(self, nc, OpDef d, op, engine, dict operands, dict attrs, location)


@cython.locals(key=list, placed=dict, k=tuple, v=View, n=str)
cpdef tuple signature(op, engine, dict operands, dict attrs, dict rels, dict serials)


@cython.locals(a=Allocation, place=tuple)
cpdef relative(View v, dict rels, dict serials, n)


@cython.locals(key=list, v=View, a=Allocation, i=Py_ssize_t)
cpdef loose_signature(tuple sig, dict operands)

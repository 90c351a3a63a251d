# Declarations for the compiled build of memo.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot class an extension type and type some locals.
import cython
from trnsim.core.tensor cimport View
from trnsim.core.isa.registry cimport OpDef

@cython.final
cdef class Verdicts:
    cdef public dict kept
    cdef public object spec, numbered
    cdef public list signatures

    cpdef number(self, tuple sig, like)

    @cython.locals(operands=dict, attrs=dict, hit=tuple, changed=dict, t=View)
    cpdef tuple checked(self, nc, OpDef d, op, engine, dict operands, dict attrs, location)


@cython.locals(key=list, placed=dict, k=tuple, v=View)
cpdef tuple signature(op, engine, dict operands, dict attrs)

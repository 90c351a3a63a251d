# Declarations for the compiled build of memo.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot class an extension type and type some locals.
import cython

@cython.final
cdef class Verdicts:
    cdef public dict kept
    cdef public object spec, numbered

    @cython.locals(operands=dict, attrs=dict, hit=tuple, changed=dict)
    cpdef tuple checked(self, nc, d, op, engine, dict operands, dict attrs, location)


@cython.locals(key=list, placed=dict, k=tuple)
cpdef tuple signature(op, engine, dict operands, dict attrs)

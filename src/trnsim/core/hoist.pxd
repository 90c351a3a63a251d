# Declarations for the compiled build of hoist.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
cimport cython
from trnsim.core.isa.registry cimport Instruction
from trnsim.core.tensor cimport View

@cython.final
cdef class Invariants:
    cdef public dict first, readers, same, aliased
    cdef public object pending

    @cython.locals(v=View)
    cpdef wrote(self, Instruction ins)

    cpdef check(self, Instruction ins, scopes, index)

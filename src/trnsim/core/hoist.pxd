# Declarations for the compiled build of hoist.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
cimport cython

@cython.final
cdef class Invariants:
    cdef public dict first, readers, same, aliased
    cdef public object pending

    cpdef wrote(self, ins)

    cpdef check(self, ins, scopes, index)

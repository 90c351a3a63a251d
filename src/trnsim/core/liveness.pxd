# Declarations for the compiled build of liveness.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
cimport cython

@cython.final
cdef class Loop:
    cdef public object first, trace, uses, last, length


@cython.final
cdef class Iteration:
    cdef public object allocs, loop, counts, step, made

# Declarations for the compiled build of intervals.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
cimport cython

@cython.final
cdef class Cell:
    cdef public object writer, owner
    cdef public list readers


@cython.locals(c=Cell)
cpdef Cell cell(writer, list readers, owner)


@cython.locals(c=Cell)
cpdef own(x)


@cython.final
cdef class IntervalMap:
    cdef public list bounds, values

# Declarations for the compiled build of intervals.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
cimport cython

@cython.final
cdef class Cell:
    cdef public object writer
    cdef public list readers
    cdef public Py_ssize_t owner, track


@cython.locals(c=Cell)
cpdef Cell cell(writer, list readers, Py_ssize_t owner, Py_ssize_t track)


@cython.locals(c=Cell)
cpdef own(x)


@cython.final
cdef class IntervalMap:
    cdef public list bounds, values
    cdef public Py_ssize_t hint


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, y=double)
cpdef Py_ssize_t right(list a, double x)


@cython.locals(first=Py_ssize_t, after=Py_ssize_t)
cpdef bint covers(list b, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi)


@cython.locals(b=list, lo=Py_ssize_t, hi=Py_ssize_t, i=Py_ssize_t, mid=Py_ssize_t, edge=Py_ssize_t)
cpdef Py_ssize_t seek(IntervalMap m, Py_ssize_t x)

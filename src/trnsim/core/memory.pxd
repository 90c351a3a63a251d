# Declarations for the compiled build of memory.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals. A __dict__ keeps a class open
# to attributes set elsewhere.
cimport cython

@cython.final
cdef class Allocation:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object memory, p0, partitions, b0, nbytes, name, kind, location, id, place, clean, source, pending
    cdef public object shared, expired, evicted, block, used, spilled, scratch, saved, consumed



@cython.final
cdef class WeakTable:
    cdef public dict refs
    cdef public object spans
    cdef object __weakref__

    cpdef pop(self, key, default=*)

    cpdef list values(self)


@cython.final
cdef class Spans:
    cdef public list order
    cdef public dict entries

    cpdef add(self, key, a)

    cpdef discard(self, key)

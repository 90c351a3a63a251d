# The compiled form of arrays.py, cimported in its place by intervals.pxd (arrays.py itself is not compiled): the
# same operations on C arrays of Py_ssize_t (and of doubles: reals), inline.
from libc.stdlib cimport calloc, realloc, free
from libc.string cimport memmove

ctypedef Py_ssize_t* ints  # an array
ctypedef double* reals  # an array of floats


cdef inline ints new(Py_ssize_t size) except NULL:
    cdef ints a = <ints> calloc(size if size > 0 else 1, sizeof(Py_ssize_t))
    if a == NULL:
        raise MemoryError()
    return a


cdef inline ints resized(ints a, Py_ssize_t size) except NULL:
    cdef ints b = <ints> realloc(a, (size if size > 0 else 1) * sizeof(Py_ssize_t))
    if b == NULL:
        raise MemoryError()
    return b


cdef inline void moved(ints a, Py_ssize_t dst, Py_ssize_t src, Py_ssize_t k) noexcept:
    if k > 0:
        memmove(a + dst, a + src, k * sizeof(Py_ssize_t))


cdef inline reals new_reals(Py_ssize_t size) except NULL:
    cdef reals a = <reals> calloc(size if size > 0 else 1, sizeof(double))
    if a == NULL:
        raise MemoryError()
    return a


cdef inline reals resized_reals(reals a, Py_ssize_t size) except NULL:
    cdef reals b = <reals> realloc(a, (size if size > 0 else 1) * sizeof(double))
    if b == NULL:
        raise MemoryError()
    return b


cdef inline void release(void* a) noexcept:
    free(a)

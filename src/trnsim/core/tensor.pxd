# Declarations for the compiled build of tensor.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
import cython
from trnsim.core.memory cimport Allocation

@cython.final
cdef class View:
    cdef public Allocation alloc
    cdef public object dtype, shape, strides, poff, offset, gather_rows, on_chip, _scanned, _region, _parts, _keyed
    cdef object __weakref__

    @cython.locals(nd=Py_ssize_t, d=Py_ssize_t, n=Py_ssize_t, s=Py_ssize_t, shape=list, strides=list, sl=slice,
                   on_chip=bint)
    cpdef View _index(self, key)

    cpdef tuple placement(self)

    cpdef View _sub(self, tuple shape, tuple strides, offset, poff, dtype, gather_rows)

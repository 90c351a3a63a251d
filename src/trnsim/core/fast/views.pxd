# Declarations for the compiled build of views.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot class an extension type and type some locals.
import cython
from trnsim.core.tensor cimport View
from trnsim.core.memory cimport Allocation

@cython.final
cdef class Parts:
    cdef public dict kept

    @cython.locals(kept=dict, v=View)
    cpdef part(self, View view, key)


@cython.locals(k=tuple, a=Allocation)
cpdef tuple keyed(View v)


@cython.locals(layouts=dict, numbered=dict)
cpdef layout_number(tuple layout)


@cython.locals(got=tuple, v=View, a=Allocation, place=tuple)
cpdef View _part(View view, key, tuple k)


@cython.locals(out=list, sl=slice)
cpdef _hashable(key)

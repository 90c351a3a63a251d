# Declarations for the compiled build of views.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot class an extension type and type some locals.
import cython

@cython.final
cdef class Parts:
    cdef public dict kept

    @cython.locals(kept=dict)
    cpdef part(self, view, key)


@cython.locals(out=list, sl=slice)
cpdef _hashable(key)

# Declarations for the compiled build of errors.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython call the user's-line lookup directly and type its locals.
import cython

@cython.locals(known=dict)
cpdef str where()

@cython.locals(hits=list, hit=tuple)
cpdef tuple _site(frame)

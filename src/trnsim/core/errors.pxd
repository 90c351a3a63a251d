# Declarations for the compiled build of errors.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython call the user's-line lookup directly and type its locals.
import cython

@cython.locals(known=dict)
cpdef str where()

cpdef tuple _site(frame)

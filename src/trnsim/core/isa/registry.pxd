# Declarations for the compiled build of registry.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals.
cdef class Record:
    cdef public object index, op, engine, placed, writes, attrs, location, sig, _regions

# Declarations for the compiled build of registry.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals. A __dict__ keeps a class open
# to attributes set elsewhere.
cimport cython

@cython.final
cdef class Record:
    # index: a C number (no int object per record, made and freed with it)
    cdef public Py_ssize_t index
    cdef public object op, engine, placed, writes, attrs, location, sig, _regions, site, hoisted, accumulated, spill


@cython.final
cdef class Instruction:
    cdef dict __dict__
    cdef public object op, engine, location, writes, _record
    cdef public dict operands, attrs

    cpdef Record record(self, index, sig=*, placed=*, site=*, hoisted=*)


@cython.final
cdef class OpDef:
    cdef public object op, engines, check, semantics, cost, writes, needs, pick, control, pure, state

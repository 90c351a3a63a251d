# Declarations for the compiled build of result.py (trnsim/compiled.py): the source is the meaning, these
# only type some locals.
import cython

@cython.locals(busy=dict, starts=list, ends=list, moved=double, s=double, f=double)
cpdef tuple interval_shares(events, dma_engines)

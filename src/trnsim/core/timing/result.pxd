# Declarations for the compiled build of result.py (trnsim/compiled.py): the source is the meaning, these
# only type some locals.
import cython
from trnsim.core.timing.scheduler cimport Event

@cython.locals(busy=dict, starts=list, ends=list, moved=double, s=double, f=double, span=double, e=Event)
cpdef tuple interval_shares(list events, dma_engines)

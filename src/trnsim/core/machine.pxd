# Declarations for the compiled build of machine.py (trnsim/compiled.py): the source is the meaning, these
# only let Cython make its hot classes extension types and type some locals. A __dict__ keeps a class open
# to attributes set elsewhere.
import cython
from trnsim.core.memory cimport Allocation
from trnsim.core.tensor cimport View
from trnsim.core.errors cimport where
from trnsim.core.isa.registry cimport Instruction, OpDef
from trnsim.core.hoist cimport Invariants
from trnsim.core.liveness cimport Iteration

@cython.final
cdef class NeuronCore:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object target, spec, gen, lnc_configs, sbuf, psum, hbm, spills, aside, psum_open, builder
    cdef public object strict, values
    cdef public object program_id, num_programs, stream, budget, rng, rng_states, accumulators, accumulator_poison
    cdef public object _peer, turns, barrier, mailbox, _counts, scopes, race_check, races, affine_order
    cdef public Invariants invariants

    @cython.locals(operands=dict, attrs=dict, t=View, a=Allocation, d=OpDef, ins=Instruction, scope=Iteration)
    cpdef submit(self, op, engine, dict kw)


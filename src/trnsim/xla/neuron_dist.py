"""torch.distributed backend "neuron": collectives on device tensors, values reduced across the rank processes.

The group moves each tensor's host values through a gloo group of the rank processes (on the loopback) and
writes the result back into the device tensor, so DDP's gradient buckets are really averaged; rank 0 times
each collective on the instance's fabric for the world being simulated and charges it to the step.
"""
from __future__ import annotations

import torch
import torch._dynamo
import torch.distributed as dist
from torch.futures import Future

from trnsim.xla import neuron

def _done(result):
    fut = Future()
    fut.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(fut)


class NeuronProcessGroup(dist.ProcessGroup):
    """A process group of the rank processes for tensors on the `neuron` device (and on the host)."""

    world = None  # the simulated world size, when larger than the processes run (set by the worker)

    def __init__(self, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self.gloo = dist.ProcessGroupGloo(dist.PrefixStore("neuron", store), rank, size, timeout)

    def getBackendName(self) -> str:
        return "neuron"

    def _charge(self, op: str, tensors) -> None:
        meter = neuron.METER
        if meter.ledger is not None:
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            meter.ledger.collective(op, nbytes, self.world or self.size())

    def _in_place(self, collective: str, tensors, opts):
        """Run gloo's `collective` on the tensors' host values, written back in place; charge it as `op`."""
        hosts = [neuron.host(t) for t in tensors]
        flat = [h.contiguous() for h in hosts]
        getattr(self.gloo, collective)(flat, opts).wait()
        for h, f in zip(hosts, flat):
            if h is not f:
                h.copy_(f)
        self._charge("all_reduce" if collective == "allreduce" else "all_gather", hosts)
        return _done(tensors)

    @torch._dynamo.disable
    def allreduce(self, tensors, opts=None):
        return self._in_place("allreduce", tensors, opts or dist.AllreduceOptions())

    @torch._dynamo.disable
    def allreduce_coalesced(self, tensors, opts=None):
        for t in tensors:
            self.allreduce([t], dist.AllreduceOptions())
        return _done(tensors)

    @torch._dynamo.disable
    def broadcast(self, tensors, opts=None):  # timed as the all-gather a broadcast costs on the ring
        return self._in_place("broadcast", tensors, opts or dist.BroadcastOptions())

    @torch._dynamo.disable
    def allgather(self, outputs, inputs, opts=None):
        outs = [[neuron.host(o).contiguous() for o in group] for group in outputs]
        self.gloo.allgather(outs, [neuron.host(t).contiguous() for t in inputs]).wait()
        for group, host_group in zip(outputs, outs):
            for o, h in zip(group, host_group):
                neuron.host(o).copy_(h)
        self._charge("all_gather", [o for g in outputs for o in g])
        return _done(outputs)

    @torch._dynamo.disable
    def _allgather_base(self, output, input, opts=None):
        chunks = list(torch.chunk(neuron.host(output), self.size()))
        return self.allgather([chunks], [input], opts)

    @torch._dynamo.disable
    def barrier(self, opts=None):
        self.gloo.barrier().wait()
        return _done(None)


def _create(store, rank, size, timeout):
    return NeuronProcessGroup(store, rank, size, timeout)


def register() -> None:
    if "neuron" not in dist.Backend.backend_list:
        dist.Backend.register_backend("neuron", _create, devices=["neuron", "cpu"])

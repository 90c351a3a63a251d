"""torch.distributed backend "neuron": collectives on device tensors, values reduced across the rank processes.

The group moves each tensor's host values through a gloo group of the rank processes (on the loopback) and
writes the result back into the device tensor, so DDP's gradient buckets are really averaged, FSDP2's
shards really gathered and its gradients really reduce-scattered; rank 0 times each collective on the
instance's fabric for the world being simulated and charges it to the step.

It is a c10d process group as DeviceMesh, FSDP2 and DTensor need one: it carries the group name c10d gives
it (functional collectives find the group by that name) and answers the tensor forms of the collectives
(`all_gather_into_tensor`, `reduce_scatter_tensor` and their coalesced forms, which functional collectives
call from C++). ReduceOp.AVG, which gloo lacks and FSDP2 asks for, is a sum divided by the group's size.
"""
from __future__ import annotations

import torch
import torch._dynamo
import torch.distributed as dist
import torch._C._distributed_c10d as _c10d
from torch.futures import Future

from trnsim.xla import neuron
from trnsim.xla.neuron import NeuronDeviceError


def _done(result):
    fut = Future()
    fut.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(fut)


def _hosts(tensors) -> list:
    """The host values of (nested lists of) device tensors, contiguous, as gloo takes them."""
    return [_hosts(t) if isinstance(t, list) else neuron.host(t).contiguous() for t in tensors]


def _write_back(tensors, hosts) -> None:
    for t, h in zip(tensors, hosts):
        if isinstance(t, list):
            _write_back(t, h)
        elif neuron.host(t) is not h:
            neuron.host(t).copy_(h)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class NeuronProcessGroup(dist.ProcessGroup):
    """A process group of the rank processes for tensors on the `neuron` device (and on the host)."""

    world = None  # the simulated world size, when larger than the processes run (set by the worker)

    def __init__(self, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self.gloo = dist.ProcessGroupGloo(dist.PrefixStore("neuron", store), rank, size, timeout)
        self._name = self._desc = ""

    # c10d asks a group for these through its C++ interface (DeviceMesh keys its dimensions by the name)
    def getBackendName(self) -> str:
        return "neuron"

    def getGroupName(self) -> str:
        return self._name

    def setGroupName(self, name: str) -> None:
        self._name = name

    def getGroupDesc(self) -> str:
        return self._desc

    def setGroupDesc(self, desc: str) -> None:
        self._desc = desc

    def _ranks(self) -> int:
        """The ranks a collective of this group spans in the simulated world."""
        if self.world and self.size() == dist.distributed_c10d._get_default_group().size():
            return self.world
        return self.size()

    def _charge(self, op: str, nbytes: float) -> None:
        meter = neuron.METER
        if meter.ledger is not None:
            meter.ledger.collective(op, nbytes, self._ranks())

    def _sum(self, flat: list, op) -> None:
        """All-reduce host tensors in place by `op` (AVG as a sum over the group's size)."""
        red = getattr(op, "op", op)
        if red == dist.ReduceOp.PREMUL_SUM:
            raise NeuronDeviceError("the neuron process group reduces by SUM, AVG, PRODUCT, MIN or MAX; "
                                    "PREMUL_SUM (a gradient divide factor other than the group's size) is not "
                                    "supported")
        avg = red == dist.ReduceOp.AVG
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.SUM if avg else red
        self.gloo.allreduce(flat, opts).wait()
        if avg:
            for f in flat:
                f.div_(self.size())

    def _reduce(self, tensors, op) -> None:
        """Reduce device (or host) tensors in place across the ranks."""
        flat = _hosts(tensors)
        self._sum(flat, op)
        _write_back(tensors, flat)

    def _through_gloo(self, collective: str, outputs, inputs, opts) -> None:
        """gloo's `collective` on the host values; the outputs written back."""
        outs = _hosts(outputs)
        getattr(self.gloo, collective)(outs, _hosts(inputs), opts).wait()
        _write_back(outputs, outs)

    @torch._dynamo.disable
    def allreduce(self, tensors, opts=None):
        self._reduce(tensors, (opts or dist.AllreduceOptions()).reduceOp)
        self._charge("all_reduce", _nbytes(tensors))
        return _done(tensors)

    @torch._dynamo.disable
    def allreduce_coalesced(self, tensors, opts=None):
        for t in tensors:
            self.allreduce([t], opts)
        return _done(tensors)

    @torch._dynamo.disable
    def broadcast(self, tensors, opts=None):  # timed as the all-gather a broadcast costs on the ring
        flat = _hosts(tensors)
        self.gloo.broadcast(flat, opts or dist.BroadcastOptions()).wait()
        _write_back(tensors, flat)
        self._charge("all_gather", _nbytes(tensors))
        return _done(tensors)

    @torch._dynamo.disable
    def allgather(self, outputs, inputs, opts=None):
        self._through_gloo("allgather", outputs, inputs, _c10d.AllgatherOptions())
        self._charge("all_gather", sum(_nbytes(g) for g in outputs))
        return _done(outputs)

    @torch._dynamo.disable
    def _allgather_base(self, output, input, opts=None):
        return self.allgather_into_tensor_coalesced([output], [input], opts)

    @torch._dynamo.disable
    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """Each output is the ranks' inputs end to end (what `all_gather_into_tensor` asks)."""
        for out, inp in zip(outputs, inputs):
            self._through_gloo("allgather", [list(torch.chunk(out, self.size()))], [inp], _c10d.AllgatherOptions())
        self._charge("all_gather", _nbytes(outputs))
        return _done(outputs)

    @torch._dynamo.disable
    def _reduce_scatter_base(self, output, input, opts=None):
        return self.reduce_scatter_tensor_coalesced([output], [input], opts)

    @torch._dynamo.disable
    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """Each output is this rank's 1/size of the inputs reduced over the ranks."""
        op = (opts or dist.ReduceScatterOptions()).reduceOp
        for out, inp in zip(outputs, inputs):
            full = neuron.host(inp).contiguous().clone()
            self._sum([full], op)
            neuron.host(out).copy_(torch.chunk(full.reshape(-1), self.size())[self.rank()].reshape(out.shape))
        self._charge("reduce_scatter", _nbytes(inputs))
        return _done(outputs)

    @torch._dynamo.disable
    def reduce_scatter(self, outputs, input_lists, opts=None):
        """outputs[i] is this rank's element of input_lists[i], reduced over the ranks."""
        op = (opts or dist.ReduceScatterOptions()).reduceOp
        for out, pieces in zip(outputs, input_lists):
            flat = [neuron.host(p).reshape(-1) for p in pieces]
            full = torch.cat(flat)
            self._sum([full], op)  # every rank's pieces, reduced: this rank's is its slice
            start = sum(f.numel() for f in flat[:self.rank()])
            neuron.host(out).copy_(full[start:start + out.numel()].reshape(out.shape))
        self._charge("reduce_scatter", sum(_nbytes(p) for p in input_lists))
        return _done(outputs)

    @torch._dynamo.disable
    def scatter(self, outputs, inputs, opts=None):  # DTensor shards a tensor from one rank: timed as an all-gather
        self._through_gloo("scatter", outputs, inputs, opts or dist.ScatterOptions())
        self._charge("all_gather", _nbytes(outputs) * self.size())
        return _done(outputs)

    @torch._dynamo.disable
    def gather(self, outputs, inputs, opts=None):  # timed as the all-gather it is the first half of
        self._through_gloo("gather", outputs, inputs, opts or dist.GatherOptions())
        self._charge("all_gather", _nbytes(inputs) * self.size())
        return _done(outputs)

    @torch._dynamo.disable
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        out = _hosts([output])
        self.gloo.alltoall_base(out[0], _hosts([input])[0], output_split_sizes, input_split_sizes,
                                opts or dist.AllToAllOptions()).wait()
        _write_back([output], out)
        self._charge("all_to_all", _nbytes([input]))
        return _done([output])

    @torch._dynamo.disable
    def barrier(self, opts=None):
        self.gloo.barrier().wait()
        return _done(None)


def _fsdp_storage() -> None:
    """FSDP2 frees a gathered parameter by resizing its storage to 0 bytes and back; a device tensor's values
    live in its host tensor, so that is the storage resized."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    if getattr(_fsdp_param.alloc_storage, "neuron", False):
        return
    alloc, free = _fsdp_param.alloc_storage, _fsdp_param.free_storage

    def alloc_storage(tensor):
        alloc(neuron.host(tensor))

    def free_storage(tensor):
        free(neuron.host(tensor))

    alloc_storage.neuron = True
    _fsdp_param.alloc_storage = _fsdp_param_group.alloc_storage = alloc_storage
    _fsdp_param.free_storage = free_storage


def _create(store, rank, size, timeout):
    _fsdp_storage()
    return NeuronProcessGroup(store, rank, size, timeout)


def register() -> None:
    if "neuron" not in dist.Backend.backend_list:
        dist.Backend.register_backend("neuron", _create, devices=["neuron", "cpu"])

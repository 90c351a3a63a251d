"""One rank of `trnsim torchrun`: the user's script, unchanged, on real torch-xla (CPU) inside a simulated instance.

    python -m trnsim.xla.worker script.py [args...]     (started by trnsim.xla.launch, one per rank)

torch-xla's CPU runtime forms no multi-process world, so this module gives the script the world of
the instance it is simulated on:

    xr.world_size(), xr.global_ordinal(), xr.local_ordinal(), xm.get_ordinal()   the launcher's ranks
    dist.init_process_group("xla")                                        the launcher's gloo group
    xm.all_reduce (so xm.reduce_gradients, xm.optimizer_step)             values reduced across the rank
                                                                          processes, time from the fabric
    xm.rendezvous                                                         a barrier of the processes

When the simulated world is larger than the processes run (`--max-procs`), the ranks not run are
taken to hold the mean of those that run: a reduction's result is the one a full world of such
replicas would give, and its time is that of the full world.

Rank 0 keeps the Ledger: at every mark_step it prices the graphs torch-xla executed, prints the live
progress line, and before a new graph runs checks that its buffers fit the NeuronCore's HBM.
"""
from __future__ import annotations

import gc
import importlib.abc
import importlib.util
import json
import re
import os
import runpy
import sys
import time
import traceback

from trnsim import flags
from trnsim.xla.graphs import eager_debug

NAMES_DEVICE = re.compile(r"""["']neuron(:\d+)?["']|\btorch_neuronx\b""")  # "neuron", 'neuron:0', torch_neuronx
ENV = flags.XLA.name  # JSON: instance, nodes, lnc, world, procs, rank, out, batch, script


def _config() -> dict:
    return json.loads(os.environ[ENV])


class Rank:
    def __init__(self, cfg: dict):
        import torch
        import torch.distributed as dist

        self.cfg, self.torch, self.dist = cfg, torch, dist
        self.world, self.procs, self.rank = cfg["world"], cfg["procs"], cfg["rank"]
        self.local = self.rank % cfg["nproc_per_node"]
        self.ledger = None
        self.neuron = False  # the script runs on the native neuron device (steps end at optimizer.step())
        self.dump = os.environ.get("XLA_SAVE_TENSORS_FILE")
        self.offset = 0
        self.checks = 0
        self.syncs = 0  # the script's step boundaries so far (equal on every rank)
        self.bf16 = cfg.get("bf16", False)  # XLA_USE_BF16 / XLA_DOWNCAST_BF16: values kept in bf16 (precision)
        self.start = time.perf_counter()
        if self.rank == 0 or cfg.get("trace"):  # with --trace every rank prices its own work
            from trnsim.plan import Cluster
            from trnsim.xla.cost import CostModel
            from trnsim.xla.graphs import CompileCache, Ledger

            cluster = Cluster(cfg["instance"], nodes=cfg["nodes"], lnc=cfg["lnc"])
            self.ledger = Ledger(CostModel(cluster, world=self.world), bf16=self.bf16, cache=CompileCache(run=cfg["out"]))
            self.ledger.timeline = bool(cfg.get("trace"))
            self.ledger.eager_debug = eager_debug()

    # --- the world -----------------------------------------------------------------------------
    def patch(self) -> None:
        """The world as the script sees it: torch.distributed now; torch-xla's runtime when the script (or a
        library it uses) imports torch_xla, which costs seconds a native-device script need not pay."""
        dist = self.dist
        init = dist.init_process_group

        def init_process_group(backend=None, *args, **kwargs):
            """The group of the rank processes: the `neuron` backend's, else gloo (for "xla" and the rest), met
            through a file in the launcher's private (0700) folder: no port another user reaches."""
            if dist.is_initialized():
                return None
            kwargs.pop("init_method", None)
            kwargs.update(rank=self.rank, world_size=self.procs,
                          store=dist.FileStore(os.path.join(self.cfg["out"], "rendezvous"), self.procs))
            return init("neuron" if backend == "neuron" else "gloo", *args, **kwargs)

        self.init_group = init_process_group

        dist.init_process_group = init_process_group
        dist.get_world_size = lambda group=None: self.world if group is None else dist.distributed_c10d.get_world_size(group)
        dist.get_rank = lambda group=None: self.rank if group is None else dist.distributed_c10d.get_rank(group)
        after_import("torch_xla", self.patch_xla)

    def patch_xla(self) -> None:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        xr.world_size = lambda: self.world
        xr.global_ordinal = lambda: self.rank
        xr.local_ordinal = lambda: self.local
        xr.process_index = lambda: self.rank
        xr.process_count = lambda: self.world
        xr.local_process_count = lambda: self.cfg["nproc_per_node"]
        xr.global_runtime_device_count = lambda: self.world
        xr.addressable_runtime_device_count = lambda: 1
        xm.xrt_world_size = lambda *a, **k: self.world
        xm.get_ordinal = lambda *a, **k: self.rank
        xm.all_reduce = self.all_reduce
        xm.xla_rendezvous = self.rendezvous
        sync = torch_xla.sync

        def traced_sync(*args, **kwargs):
            if "/torch_xla/_dynamo/" in sys._getframe(1).f_code.co_filename:
                return sync(*args, **kwargs)  # torch.compile's own sync, inside the user's step
            self.before_step()
            out = sync(*args, **kwargs)
            if self.bf16:  # the step's results, written to HBM in bf16 as the runtime rounds them
                from trnsim.xla.precision import keep_bf16

                keep_bf16(_live(self.torch), self.syncs)
            self.syncs += 1
            self.after_step()
            return out

        torch_xla.sync = traced_sync
        if self.ledger is not None:
            self.patch_compiled(torch_xla._XLAC)

    def patch_compiled(self, C) -> None:
        """torch.compile(backend="openxla") runs its graphs from torch-xla's cache, outside the dump: each run
        is handed to the Ledger with the graph's HLO, taken when the graph was compiled."""
        from trnsim.xla.graphs import Record

        warm_up, run_cached = C._xla_warm_up_cache, C._run_cached_graph
        texts: dict = {}

        def warm_up_cache(tensors, devices, *args, **kwargs):
            texts[C._get_graph_hash(list(tensors))] = C._get_xla_tensors_hlo(list(tensors))
            return warm_up(tensors, devices, *args, **kwargs)

        def run_cached_graph(graph_hash, inputs, *args, **kwargs):
            if graph_hash in texts:
                frames = _main_frames()
                self._read(frames)  # graphs executed before this one (its inputs) come first
                self.ledger.add(Record(frames, texts[graph_hash], kind="compiled"))
            return run_cached(graph_hash, inputs, *args, **kwargs)

        C._xla_warm_up_cache, C._run_cached_graph = warm_up_cache, run_cached_graph

    def patch_neuron(self) -> None:
        """The native `neuron` device: installed, priced into this rank's Ledger, a step per optimizer step."""
        from torch.optim.optimizer import register_optimizer_step_post_hook

        from trnsim.xla import neuron, neuron_dist, torchneuron

        torchneuron.install()
        self.neuron = True
        neuron.METER.ledger = self.ledger
        neuron_dist.NeuronProcessGroup.world = self.world

        def step_done(opt, args, kwargs):
            params = [p for g in opt.param_groups for p in g["params"]]
            if params and params[0].device.type == neuron.NAME:
                if self.ledger is not None:  # weights, gradients, optimizer state and activations kept alive
                    s = self.ledger.current
                    s.memory_bytes = max(s.memory_bytes, neuron.METER.live_bytes())
                    s.warm_up = not self.ledger.steps  # the first also moved, sharded and set up the model
                self.after_step()

        register_optimizer_step_post_hook(step_done)

    def all_reduce(self, reduce_type, inputs, scale=1.0, groups=None, pin_layout=True):
        """xm.all_reduce with values reduced across the rank processes (see the module docstring)."""
        import torch_xla

        torch, dist = self.torch, self.dist
        single = isinstance(inputs, torch.Tensor)
        tensors = [inputs] if single else list(inputs)
        if not tensors:
            return inputs
        torch_xla._XLAC._xla_sync_multi(tensors, devices=[], wait=True, sync_xla_data=False)
        host = [t.detach().cpu() for t in tensors]
        flat = torch.cat([h.reshape(-1).to(torch.float64 if h.is_floating_point() else torch.int64) for h in host])
        ops = {"sum": dist.ReduceOp.SUM, "mul": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
               "max": dist.ReduceOp.MAX}
        if self.procs > 1:
            self.init_group()
            dist.all_reduce(flat, op=ops.get(reduce_type, dist.ReduceOp.SUM))
        if reduce_type == "sum" and self.world != self.procs:  # the ranks not run hold the mean of those run
            flat = flat * (self.world / self.procs)
        flat = flat * scale if scale != 1.0 else flat
        size = len(groups[0]) if groups else self.world
        if self.ledger is not None:
            self.ledger.collective("all_reduce", sum(t.numel() * t.element_size() for t in tensors), size)
        out, i = [], 0
        for t, h in zip(tensors, host):
            n = h.numel()
            out.append(flat[i:i + n].reshape(h.shape).to(h.dtype).to(t.device))
            i += n
        if single:
            return out[0]
        for t, r in zip(tensors, out):
            t.copy_(r)
        return inputs

    def rendezvous(self, payload=b"", replicas=None, tag=None):
        if self.procs == 1:
            return [payload]
        self.init_group()
        torch = self.torch  # bytes as byte tensors: nothing another process sends is unpickled
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else torch.zeros(0, dtype=torch.uint8)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.procs)]
        self.dist.all_gather(sizes, torch.tensor([len(data)]))
        most = max(int(n) for n in sizes)
        got = [torch.zeros(most, dtype=torch.uint8) for _ in range(self.procs)]
        self.dist.all_gather(got, torch.cat([data, torch.zeros(most - len(data), dtype=torch.uint8)]))
        return [bytes(g[:int(n)].numpy()) for g, n in zip(got, sizes)]

    # --- accounting (rank 0) -------------------------------------------------------------------
    def before_step(self) -> None:
        """Before a new graph runs: do its buffers fit the core's HBM? (only while graphs are new)"""
        if self.ledger is None or not (len(self.ledger.steps) < 2 or self.ledger.steps[-1].compilations):
            return
        import torch_xla

        from trnsim.xla import hlo
        from trnsim.xla.cost import DeviceOutOfMemoryError

        live = _live(self.torch)
        if not live:
            return
        cost = self.ledger.model.cost(hlo.parse(self.ledger.stored(torch_xla._XLAC._get_xla_tensors_hlo(live))))
        cap = self.ledger.model.hbm_per_rank
        if cost.memory_bytes > cap:
            gib = 2**30
            cluster = self.ledger.model.cluster
            raise DeviceOutOfMemoryError(
                f"{_script_line() or self.cfg['script']}: out of device memory on NeuronCore {self.rank} of "
                f"{cluster.system.name}: the graph needs {cost.memory_bytes / gib:.2f} GiB (tensors on the device "
                f"{cost.parameter_bytes / gib:.2f} GiB, its buffers {cost.temporary_bytes / gib:.2f} GiB) but a "
                f"rank has {cap / gib:.2f} GiB of HBM (LNC {cluster.lnc})")

    def _read(self, frames: list | None = None) -> None:
        """Price the graphs torch-xla dumped since the last read; `frames` stand for the user's frames of
        graphs cut where Python shows none (autograd's backward thread)."""
        from trnsim.xla.graphs import read_records

        path = self.dump + ".0" if self.dump and os.path.exists(self.dump + ".0") else self.dump
        if not path or not os.path.exists(path):
            return
        with open(path) as f:
            f.seek(self.offset)
            text = f.read()
        recs, used = read_records(text)
        self.offset += len(text[:used].encode())
        for r in recs:
            if frames and r.user_line() == "?":
                r.frames = r.frames + frames
            self.ledger.add(r)

    def after_step(self) -> None:
        if self.ledger is None:
            return
        self._read()
        step = self.ledger.end_step()
        if self.cfg.get("progress") and self.rank == 0:
            n = len(self.ledger.steps)
            msg = (f"trnsim: step {n}  {step.time_ns / 1e6:.3f} ms simulated  {step.graphs} graph(s)  "
                   f"{len(self.ledger.compilations)} compilation(s)  {time.perf_counter() - self.start:.1f} s")
            end = "\r" if sys.stderr.isatty() else "\n"
            print(msg, end=end, file=sys.stderr, flush=True)

    def finish(self, error: str | None = None) -> None:
        if self.ledger is None:
            return
        self._read()
        if self.ledger.current.graphs and not (self.neuron and self.ledger.steps):
            self.ledger.end_step()  # on the neuron device a step ends at optimizer.step(): what follows is no step
        led = self.ledger
        if self.cfg.get("trace"):
            from trnsim.xla import timeline

            timeline.write(self.cfg["trace"], led.steps, self.rank, f"{os.path.basename(self.cfg['script'])} on "
                           f"{self.cfg['instance']}")
        if self.rank != 0:
            return
        if self.cfg.get("progress") and sys.stderr.isatty():
            print(file=sys.stderr)
        if "trnsim.xla.neuron_compile" in sys.modules:
            from trnsim.xla.neuron_compile import graph_breaks

            led.graph_breaks = graph_breaks()
        out = {"graph_breaks": getattr(led, "graph_breaks", []), "steps": [s.to_dict() for s in led.steps], "compilations": led.compilations, "cache_hits": led.hits,
               "graphs": len(led.priced), "unpriced": led.unpriced, "estimates": led.estimates, "error": error}
        with open(os.path.join(self.cfg["out"], "rank0.json"), "w") as f:
            json.dump(out, f)


def after_import(name: str, then) -> None:
    """Call `then()` once module `name` has been imported (now, if it already has been)."""
    if name in sys.modules:
        then()
        return

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_module(module):
                    run(module)
                    then()

                spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _main_frames() -> list[tuple[str, str, int]]:
    """The main thread's Python frames, innermost first: where the user's script is, even when a graph runs
    from autograd's backward thread."""
    import threading

    frame = sys._current_frames().get(threading.main_thread().ident) or sys._getframe(1)
    return [(f.name, f.filename, f.lineno) for f in reversed(traceback.extract_stack(frame))]


def _live(torch) -> list:
    """Every tensor alive on the XLA device."""
    return [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and _on_xla(o)]


def _on_xla(t) -> bool:
    """Whether tensor `t` lives on the XLA device; a tensor the garbage collector is tearing down has no
    device any more (reading it raises) and holds no buffer."""
    try:
        return t.device.type == "xla"
    except RuntimeError:
        return False


def _script_line() -> str | None:
    """`path:line` of the innermost frame in the user's code (not trnsim, not an installed package)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(here) and "site-packages" not in path and not path.startswith("<"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def run_script(script: str, args: list[str]) -> tuple[str | None, int]:
    """Run the user's script as `python script args...` would: (trnsim's error message or None, exit code).
    An error of trnsim's own is reported by the launcher; any other exception goes up with its traceback."""
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return None, e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:  # noqa: BLE001 - the launcher reports it; trnsim's own errors carry their message
        from trnsim.errors import TrnsimError

        if not isinstance(e, TrnsimError):
            raise
        print(f"trnsim: error: {e}", file=sys.stderr)
        return f"{type(e).__name__}: {e}", 3
    return None, 0


def main(argv: list[str]) -> int:
    from trnsim import shim
    from trnsim.nki.neuronx import custom_op
    from trnsim.xla.precision import take_flags

    cfg = _config()
    if eager_debug():  # torch-xla's own switch, read when it is imported: each op a graph of its own
        os.environ["XLA_USE_EAGER_DEBUG_MODE"] = "1"
    cfg["bf16"] = take_flags()  # before torch-xla reads them: trnsim keeps bf16 storage itself
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    rank = Rank(cfg)
    rank.patch()
    shim.install()  # `import nki`, `import torch_neuronx` (custom operators) resolve to trnsim
    if rank.ledger is not None:  # custom C++ operators' GpSimd time goes to the step that ran them
        custom_op.on_call = rank.ledger.custom_op
    with open(cfg["script"], encoding="utf-8", errors="replace") as f:
        if NAMES_DEVICE.search(f.read()):  # the script names the device: set it up, as importing TorchNeuron does
            rank.patch_neuron()
    error, code = run_script(cfg["script"], argv[1:])
    rank.finish(error)
    if rank.procs > 1 and rank.dist.is_initialized() and error is None:
        rank.dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

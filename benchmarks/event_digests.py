"""Scheduler equality check: every event of a few timing-only streams, digested, so that a speed change to the
scheduler can show that it moved no start, end, track, dependency, blocker, FLOP count or DMA piece.

Prints one JSON object: per stream (the matmul ladder's optimised step on trn1 and trn2, its tiled step on trn1,
its blocked step on trn1 and trn2, the fused Mamba v1-v3 kernels at 1024 channels x 2048 steps on trn1) the
count of events and a sha256 over each event's fields (floats by repr) and the SBUF/PSUM peaks. `--python` runs
the Python build of the speed layer's compiled modules (TRNSIM_FAST=0 turns the speed layer off altogether);
`--against REV` also digests the source tree of git revision REV (its Python build) in a fresh process and
says, per stream, whether the two agree (`same`).
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def digests() -> dict:
    """stream -> {"events": n, "sha256": digest} for this process's trnsim."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "examples"))
    import mamba
    import matmul_ladder as ladder

    from trnsim.core.timing import simulate

    streams = []
    operands = [np.zeros((ladder.SHAPE["K"], ladder.SHAPE[d]), ladder.nl.bfloat16.np) for d in "MN"]
    for name, target in (("matmul_optimized", "trn1"), ("matmul_optimized", "trn2"), ("matmul_tiled", "trn1"),
                         ("matmul_blocked", "trn1"), ("matmul_blocked", "trn2")):
        streams.append((f"{name}/{target}", target, getattr(ladder, name), operands))
    seq = [np.zeros(x.shape, np.float32) for x in mamba.inputs(1024, 2048, state=16)]
    for name in ("mamba_v1", "mamba_v2", "mamba_v3"):
        streams.append((f"{name}/trn1", "trn1", getattr(mamba, name), seq))
    out = {}
    for key, target, kernel, args in streams:
        tl = simulate(kernel.trace(*args, target=target, values=False)[0].stream, target)
        h = hashlib.sha256()
        for e in tl.events:
            h.update(repr((e.index, e.start, e.end, e.track, tuple(e.deps), e.blocker, e.flops, e.model_flops,
                           tuple(e.pieces))).encode())
        h.update(repr(sorted(tl.memory_peak.items())).encode())
        out[key] = {"events": len(tl.events), "sha256": h.hexdigest()}
    return out


def main():
    if "--child" in sys.argv:  # run by --against in the other tree: its own trnsim, already on the path
        print(json.dumps(digests()))
        return
    import trnsim  # noqa: F401  installs the finder of the compiled modules, which --python removes

    if "--python" in sys.argv:  # the compiled modules load through trnsim.compiled's finder: drop it
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_Finder"]
    from trnsim.core.timing import scheduler

    result = {"scheduler": Path(scheduler.__file__).name, "streams": digests()}
    against = _arg("--against")
    if against:
        with tempfile.TemporaryDirectory() as tmp:
            tree = subprocess.run(["git", "-C", str(ROOT), "archive", against, "src", "examples"], check=True,
                                  capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tree, check=True)
            env = dict(os.environ, PYTHONPATH=str(Path(tmp) / "src"))
            script = Path(tmp) / "benchmarks" / "event_digests.py"
            script.parent.mkdir()
            script.write_text(Path(__file__).read_text())
            theirs = json.loads(subprocess.run([sys.executable, str(script), "--child"], env=env, check=True,
                                               capture_output=True, text=True, cwd=tmp).stdout)
        result["against"] = against
        result["same"] = {k: theirs.get(k) == v for k, v in result["streams"].items()}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

"""`nki` on the emulator: `@nki.jit` kernels run eagerly on a simulated NeuronCore.

    import trnsim.nki as nki
    import trnsim.nki.language as nl

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

Calling the kernel with numpy arrays (or torch tensors) returns arrays of the same kind. The target is
NEURON_PLATFORM_TARGET_OVERRIDE (trn1|trn2|trn3, default trn2); `kernel[2](...)` launches on LNC 2.
"""
from __future__ import annotations

from trnsim.nki import collectives, compiler, isa, language, typing  # noqa: F401
from trnsim.nki._frontend import Kernel
from trnsim.numerics import DType as dtype  # `nki.dtype`: the type of nl.float32 ..., usable as an annotation


def jit(fn=None, **options):
    """Make `fn` a kernel; calling it runs on the emulator (as `NKI_SIMULATOR=1` does for the real one)."""
    if fn is None:
        return lambda f: Kernel(f, **options)
    return fn if isinstance(fn, Kernel) else Kernel(fn, **options)


def simulate(kernel):
    """`nki.simulate(kernel)(*args)`: run on the CPU emulator; `nki.simulate(kernel[2])` for LNC 2."""
    return kernel if isinstance(kernel, Kernel) else Kernel(kernel)


def __getattr__(name):
    """`nki.__version__`: the release of the NKI version kernels target (nki/versions.py)."""
    if name == "__version__":
        from trnsim.nki import versions
        return versions.RELEASES[versions.target()]
    raise AttributeError(f"module 'nki' has no attribute {name!r}")


__all__ = ["jit", "simulate", "language", "isa", "typing", "compiler", "collectives", "Kernel", "dtype"]

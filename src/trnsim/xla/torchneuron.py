"""The native `neuron` device as importing TorchNeuron sets it up: the device and its tensors (neuron.py),
torch.compile's `neuron` backend (neuron_compile.py) and the `neuron` process group (neuron_dist.py)."""
from __future__ import annotations

from trnsim.xla import neuron, neuron_compile, neuron_dist

_done = False


def install() -> None:
    """Make `neuron` a PyTorch device with its compiler backend and process group (idempotent)."""
    global _done
    if _done:
        return
    neuron.install()
    neuron_compile.register()
    neuron_dist.register()
    _done = True

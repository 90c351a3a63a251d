"""`neuronxcc.nki.typing` (beta): `nt.tensor[...]` and `nt.mutable_tensor[...]` annotations; isinstance accepts
the beta front end's tensors and tiles as well as core views."""
from trnsim.nki.beta._tile import Tensor, Tile
from trnsim.nki.typing import tensor as _tensor
from trnsim.nki.typing import _views


class tensor(_tensor):  # noqa: N801 - the NKI name
    kinds = _views() + (Tensor, Tile)


class mutable_tensor(tensor):  # noqa: N801 - the NKI name
    """A tensor argument the kernel writes in place."""

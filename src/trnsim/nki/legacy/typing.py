"""`neuronxcc.nki.typing` (beta): `nt.tensor[...]` and `nt.mutable_tensor[...]` annotations."""
from trnsim.nki.typing import mutable_tensor, tensor  # noqa: F401

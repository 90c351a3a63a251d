"""`nki.typing`: shape annotations (`nt.tensor[128, 512]`); annotations only, never checked at run time."""
from __future__ import annotations


class _Tensor:
    def __getitem__(self, shape):
        return ("tensor", shape if isinstance(shape, tuple) else (shape,))


tensor = _Tensor()
mutable_tensor = _Tensor()

"""`nki.typing`: shape annotations (`nt.tensor[128, 512]`), never checked at run time, and the tensor type a
kernel may test its arguments against (`isinstance(x, nt.tensor)`, as published kernels do to tell a tensor
from a number)."""
from __future__ import annotations


class TensorType(type):
    """The metaclass of `tensor`: subscripting annotates a shape; isinstance accepts the front end's tensors
    (`kinds`: what each front end passes to kernels and returns from calls)."""

    kinds: tuple = ()

    def __getitem__(cls, shape):
        return ("tensor", shape if isinstance(shape, tuple) else (shape,))

    def __instancecheck__(cls, x) -> bool:
        return isinstance(x, cls.kinds)


def _views() -> tuple:
    from trnsim.core.tensor import View
    return (View,)


class tensor(metaclass=TensorType):  # noqa: N801 - the NKI name
    kinds = _views()


class mutable_tensor(tensor):  # noqa: N801 - the NKI name
    """A tensor argument the kernel writes in place; every tensor is one here (the type is an annotation)."""

"""The data types of the NeuronCore, named as nki.language names them, and how each is stored in numpy.

Storage: ml_dtypes types where they exist (bfloat16, the fp8s, fp4, e8m0), float32 for tfloat32
(the low 13 mantissa bits held at zero), uint32 for the fp8 x4 packed containers, uint16 for the fp4 one and numpy bool_ for bool_
(one byte holding 0 or 1, the bytes the hardware stores as uint8).

Overflow and NaN per float type (RNE casts match ml_dtypes bit for bit):

| type           | layout  | max     | inf | NaN               | overflow on cast        |
| float32        | 1-8-23  | 3.4e38  | yes | yes               | inf                     |
| tfloat32       | 1-8-10  | 3.4e38  | yes | yes (quiet)       | inf                     |
| bfloat16       | 1-8-7   | 3.39e38 | yes | yes (quiet)       | inf                     |
| float16        | 1-5-10  | 65504   | yes | yes               | inf                     |
| float8_e4m3    | 1-4-3   | 240     | yes | S.1111.xxx (x!=0) | inf (IEEE-style legacy) |
| float8_e4m3fn  | 1-4-3   | 448     | no  | S.1111.111        | NaN                     |
| float8_e5m2    | 1-5-2   | 57344   | yes | yes               | inf                     |
| float8_e3m4    | 1-3-4   | 15.5    | yes | yes               | inf                     |
| float8_e8m0fnu | 0-8-0   | 2^127   | no  | 0xFF              | NaN; no zero, no sign   |
| float4_e2m1fn  | 1-2-1   | 6       | no  | no                | saturates to +-6        |

The legacy NKI float8_e4m3 is ml_dtypes' IEEE-style e4m3 (bias 7, max 240, with inf), which is what
neuronxcc.nki.language.float8_e4m3 was (docs: general/nki/api/generated/nki.language.float8_e4m3).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from trnsim.errors import UnknownNameError


class DType(str):
    """One NeuronCore data type: its nki.language name, its numpy storage and its number format.

    A DType is the string of its name, as the current NKI API's dtypes are (nki/api/nki/language/__init__.py:
    NkiTensor, "NKI dtype string"): `str(nl.float32) == "float32"` and `nl.float32 == "float32"`. Each type
    exists once (the module constants below) and names are unique, so two DTypes are equal when they are the
    same object; unpickling returns the same constant. A DType also equals the numpy type it stands for.

    `mant`, `exp` and `bias` describe float formats (explicit mantissa bits, exponent bits, bias);
    `overflow` says what a cast past the largest finite value gives ('inf', 'nan' or 'saturate').
    Packed x4 types hold four `elem` values in one container (`np`: uint32 for fp8, uint16 for fp4).
    """

    name: str
    np: np.dtype
    bits: int
    kind: str  # "float" | "int" | "uint" | "bool" | "packed"
    mant: int
    exp: int
    bias: int
    overflow: str | None
    elem: DType | None

    def __new__(cls, name, np_, bits, kind, mant=0, exp=0, bias=0, overflow=None, elem=None):
        self = super().__new__(cls, name)
        self.name, self.np, self.bits, self.kind = name, np_, bits, kind
        self.mant, self.exp, self.bias, self.overflow, self.elem = mant, exp, bias, overflow, elem
        return self

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other):
        """By name against strings and DTypes (str's comparison); against numpy dtypes and scalar types by the
        type they resolve to, so a beta-API tile's dtype equals `nl.float32` (np.float32) and `nl.bfloat16`."""
        if isinstance(other, str):
            return str.__eq__(self, other)
        try:
            return dtype(other) is self
        except (UnknownNameError, TypeError):
            return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __reduce__(self):
        return dtype, (self.name,)

    @property
    def itemsize(self) -> int:
        """Bytes of numpy storage per element (fp4 takes a whole byte; an x4 container four)."""
        return self.np.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_packed(self) -> bool:
        return self.kind == "packed"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("float", "int") and self.name != "float8_e8m0fnu"

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value of a float format (e8m0 has no subnormals)."""
        return -self.bias if self.mant == 0 else 1 - self.bias

    @property
    def max(self) -> float:
        """Largest finite value (floats) or largest integer."""
        if self.is_float:
            return float(ml_dtypes.finfo(self.np).max) if self.name != "tfloat32" else float(2**128 - 2**(128 - 11))
        if self.is_int:
            return int(np.iinfo(self.np).max)
        raise TypeError(f"{self.name} has no maximum")

    def __repr__(self) -> str:
        return f"trnsim.numerics.{self.name}"


def _f(name, storage, bits, mant, exp, bias, overflow):
    return DType(name, np.dtype(storage), bits, "float", mant, exp, bias, overflow)


float32 = _f("float32", np.float32, 32, 23, 8, 127, "inf")
# TF32 keeps FP32's exponent and 10 mantissa bits; stored in float32 with the low 13 bits zero.
tfloat32 = _f("tfloat32", np.float32, 19, 10, 8, 127, "inf")
bfloat16 = _f("bfloat16", ml_dtypes.bfloat16, 16, 7, 8, 127, "inf")
float16 = _f("float16", np.float16, 16, 10, 5, 15, "inf")
float8_e4m3 = _f("float8_e4m3", ml_dtypes.float8_e4m3, 8, 3, 4, 7, "inf")
float8_e4m3fn = _f("float8_e4m3fn", ml_dtypes.float8_e4m3fn, 8, 3, 4, 7, "nan")
float8_e5m2 = _f("float8_e5m2", ml_dtypes.float8_e5m2, 8, 2, 5, 15, "inf")
float8_e3m4 = _f("float8_e3m4", ml_dtypes.float8_e3m4, 8, 4, 3, 3, "inf")
float8_e8m0fnu = _f("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, 8, 0, 8, 127, "nan")
float4_e2m1fn = _f("float4_e2m1fn", ml_dtypes.float4_e2m1fn, 4, 1, 2, 1, "saturate")

float8_e4m3fn_x4 = DType("float8_e4m3fn_x4", np.dtype(np.uint32), 32, "packed", elem=float8_e4m3fn)
float8_e5m2_x4 = DType("float8_e5m2_x4", np.dtype(np.uint32), 32, "packed", elem=float8_e5m2)
float4_e2m1fn_x4 = DType("float4_e2m1fn_x4", np.dtype(np.uint16), 16, "packed", elem=float4_e2m1fn)

int8 = DType("int8", np.dtype(np.int8), 8, "int")
int16 = DType("int16", np.dtype(np.int16), 16, "int")
int32 = DType("int32", np.dtype(np.int32), 32, "int")
int64 = DType("int64", np.dtype(np.int64), 64, "int")  # NKI 0.7: scalar_load / scalar_store tiles and DMA only
uint8 = DType("uint8", np.dtype(np.uint8), 8, "uint")
uint16 = DType("uint16", np.dtype(np.uint16), 16, "uint")
uint32 = DType("uint32", np.dtype(np.uint32), 32, "uint")
bool_ = DType("bool_", np.dtype(np.bool_), 8, "bool")

ALL: tuple[DType, ...] = (
    float32, tfloat32, bfloat16, float16, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e3m4,
    float8_e8m0fnu, float4_e2m1fn, float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4,
    int8, int16, int32, int64, uint8, uint16, uint32, bool_,
)
FLOATS = tuple(t for t in ALL if t.is_float)
PACKED = tuple(t for t in ALL if t.is_packed)
BY_NAME = {t.name: t for t in ALL} | {"bool": bool_}
# numpy storage -> the type a plain numpy array of that storage means (float32, not tfloat32; uint32,
# not an x4 container).
_BY_NUMPY = {t.np: t for t in reversed(ALL) if not t.is_packed and t is not tfloat32}
# The beta NKI API's tfloat32 is a 4-byte void numpy dtype (neuronxcc.nki.language.tfloat32 = np.dtype('|V4')).
TFLOAT32_HOST = np.dtype("V4")
_BY_NUMPY[TFLOAT32_HOST] = tfloat32


# Short spellings the tools take -> nki names, the first spelling of each type the one tools print: the CLI's
# and nccom-test's (bf16, fp8_e5m2) and XLA HLO's (f32, f8e4m3fn).
ALIASES = {"fp32": "float32", "f32": "float32", "tf32": "tfloat32", "bf16": "bfloat16", "fp16": "float16",
           "f16": "float16", "fp8": "float8_e4m3", "fp8e4": "float8_e4m3", "fp8_e4m3": "float8_e4m3",
           "f8e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2", "f8e5m2": "float8_e5m2", "fp8_e4m3fn": "float8_e4m3fn",
           "f8e4m3fn": "float8_e4m3fn", "fp8_e3m4": "float8_e3m4", "f8e3m4": "float8_e3m4"}
SHORT = {v: k for k, v in reversed(ALIASES.items())}  # nki name -> the spelling tools print
# nki names -> the planner's dtype families (the keys of a chip's peak-FLOPS table)
FAMILIES = {"float32": "fp32", "tfloat32": "tf32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3": "fp8",
            "float8_e5m2": "fp8", "float8_e4m3fn": "fp8", "float8_e3m4": "fp8"}


def dtype_name(text: str) -> str:
    """The nki name of a dtype written `text` (an alias, or already an nki name: returned as it is)."""
    return ALIASES.get(text, text)


def family(text: str) -> str | None:
    """The planner's dtype family of a dtype written `text` (fp32, bf16, fp8...), or None for one it has none of."""
    return FAMILIES.get(dtype_name(text))


def dtype(x) -> DType:
    """Resolve a DType, an nki name ('bfloat16'), a numpy dtype or a numpy scalar type to a DType."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in BY_NAME:
            return BY_NAME[x]
        raise UnknownNameError("dtype", x, [t.name for t in ALL])
    try:
        npd = np.dtype(x)
    except TypeError:
        raise UnknownNameError("dtype", repr(x), [t.name for t in ALL]) from None
    if npd in _BY_NUMPY:
        return _BY_NUMPY[npd]
    raise UnknownNameError("dtype", str(npd), [t.name for t in ALL])

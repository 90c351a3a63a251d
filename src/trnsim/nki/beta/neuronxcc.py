"""The `neuronxcc` package as the shim presents it: only its `nki` subpackage (the beta NKI API)."""
from trnsim.nki import beta as nki  # noqa: F401

"""`neuronxcc.nki.compiler.backends.neuron.{indexing,tensor}` (beta): the compiler-internal classes kernels name
in annotations, `TileIndex` (an index expression such as `nl.arange(128)[:, None]`) and `local_tile` (a tile)."""
from trnsim.nki.beta._grid import Expr as TileIndex  # noqa: F401
from trnsim.nki.beta._tile import Tile as local_tile  # noqa: F401

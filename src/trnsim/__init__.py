"""trnsim: a software Trainium.

Layers, each importing only those below it:
specs (the hardware catalog) < numerics < core (the NeuronCore) < nki (front ends) < fabric (many chips)
< plan (training runs) < report < cli.  See docs/layout.md.
"""
__version__ = "0.1.0"

from trnsim import compiled as _compiled  # noqa: E402  first: the built modules load in place of their sources

_compiled.install()

from trnsim.specs import chip, chips, hardware, instance, instances, neuroncore, system, systems, ultraserver  # noqa: E402
from trnsim.core.timing import benchmark  # noqa: E402
from trnsim.fabric import cluster  # noqa: E402

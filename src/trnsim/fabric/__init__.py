"""trnsim.fabric: Trainium systems and clusters, their links, and collectives with values and time.

    >>> import trnsim.fabric as tf
    >>> c = tf.cluster("trn1.32xlarge", nodes=2)              # 32 chips, 64 ranks, EFA between
    >>> t_ns, algorithm, steps = tf.collective_time("all_reduce", 2**30, None, c)
    >>> tf.all_reduce([x0, x1, ...], cluster=c)               # values, rounded as the algorithm rounds

See docs/fabric.md.
"""
from trnsim.fabric.cluster import Cluster, ClusterError, Device, RankError, RankLocation, cluster
from trnsim.fabric.collectives import (
    REDUCE_OPS, CollectiveResult, CollectiveShapeError, all_gather, all_reduce, all_to_all, all_to_allv, broadcast,
    permute, reduce_scatter, send_recv,
)
from trnsim.fabric.runtime import ALGORITHMS, OPS, AlgorithmError
from trnsim.fabric.timing import MODELS, bus_factor, choose, collective_time

Placement, ShapeError = RankLocation, CollectiveShapeError  # the names earlier releases exported

__all__ = [
    "ALGORITHMS", "MODELS", "OPS", "REDUCE_OPS", "AlgorithmError", "Cluster", "ClusterError", "CollectiveResult", "CollectiveShapeError",
    "Device", "Placement", "RankError", "RankLocation", "ShapeError", "all_gather", "all_reduce", "all_to_all", "all_to_allv", "broadcast", "bus_factor",
    "choose", "cluster", "collective_time", "permute", "reduce_scatter", "send_recv",
]

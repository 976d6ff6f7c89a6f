"""``rtxcore.nn.parallel``: data parallelism across processes
(``DistributedDataParallel``), and ``DataParallel`` as a one-device wrapper."""

from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]

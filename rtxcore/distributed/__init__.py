"""``rtxcore.distributed``: process groups and collectives, as ``torch.distributed``.

Processes are started by an MPI launcher (``mpiexec -n 4 python train.py`` or
``python -m rtxcore.distributed.run -n 4 train.py``); ``init_process_group()``
joins them. A script run without a launcher gets a world of one process, where
every collective is a no-op, so the same script runs alone or distributed.

Collectives work in place on tensors of any device, as PyTorch's do: cpu
tensors go to MPI as buffers without a copy, tensors on other devices are
staged through host memory (one transfer each way) unless the backend takes
them natively (``nccl``: cuda). ``async_op=True`` returns a :class:`Work`
whose ``wait()`` finishes the operation. Collectives are not recorded by
autograd.

Communication backends are plugins (``rtx_comm_backends``; the contract is
``rtxcore.dispatch.comm``, see ``rtxcore.distributed.backend``). Faults end the
job: see ``faults``. ``RTX_DISTRIBUTED_DEBUG=1`` checks before every collective
that all ranks call the same one with the same shapes and dtypes, and names
the ranks that differ.

The package, by module:

- ``groups``: joining the job, the world and new groups, ranks and sizes;
- ``collectives``: the tensor collectives and send/recv, on ``checks`` (the
  argument checks, ``ReduceOp``), ``buffers`` (tensors as the backend's arrays)
  and ``work`` (blocking under the watchdog, or a ``Work``);
- ``objects``: the object collectives (pickled, through the tensor ones);
- ``faults``: the fault guard and the watchdog;
- ``backend`` (the contract, the world of one process, finding backends),
  ``mpi`` (the built-in backend), ``run`` (the launcher), ``conformance`` (the
  check a backend passes), ``optim`` (``ZeroRedundancyOptimizer``).
"""

from __future__ import annotations

# (besides __all__: Communicator, SelfBackend, comm_backends, DEFAULT_TIMEOUT, and
# _group, which nn.parallel's DDP uses, stay reachable here as they were)
from .backend import (CommBackend, CommBackendUnavailable, Communicator,  # noqa: F401
                      SelfBackend, comm_backends)
from .checks import ReduceOp
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, all_to_all_single,
                          barrier, broadcast, gather, irecv, isend, recv, reduce, reduce_scatter,
                          reduce_scatter_tensor, scatter, send)
from .groups import (DEFAULT_TIMEOUT, GroupMember, ProcessGroup, _group,  # noqa: F401
                     destroy_process_group, get_backend, get_process_group_ranks, get_rank,
                     get_world_size, init_process_group, is_available, is_initialized,
                     is_mpi_available, is_nccl_available, new_group)
from .objects import (all_gather_object, broadcast_object_list, gather_object,
                      scatter_object_list)
from .work import Work
from . import optim  # noqa: I001  (ZeroRedundancyOptimizer, reachable as dist.optim)

__all__ = [
    "ReduceOp", "Work", "ProcessGroup", "GroupMember", "init_process_group",
    "destroy_process_group", "is_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "get_rank", "get_world_size", "get_backend", "new_group",
    "get_process_group_ranks", "all_reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "reduce", "gather",
    "scatter", "all_to_all_single", "barrier", "send", "recv", "isend", "irecv",
    "all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
    "CommBackend", "CommBackendUnavailable",
]

"""Type stubs of strata._strata, the compiled part of the strata package.

Written from `python -m nanobind.stubgen -m strata._strata` output, with the buffer arguments
typed (the binding takes them as plain objects and checks them itself) and strata.Error spelled
out (it is created with the C API, so stubgen only re-exports it).
"""

from collections.abc import Sequence
import enum
from typing import Any, Protocol, TypeAlias

__version__: str
ANY_SOURCE: int


def library_versions() -> list[tuple[str, str]]:
    """[(name, version)] of Strata and the libraries it runs on, as loaded: Strata, MPI, UCX,
    hwloc, libxml2."""


class _SupportsDLPack(Protocol):
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...


# Anything exporting DLPack (numpy arrays, torch CPU tensors) or the buffer protocol: used in
# place, so it must be C-contiguous host memory of a supported dtype (writable where written).
_BufferLike: TypeAlias = _SupportsDLPack | bytearray | memoryview | bytes


class Error(RuntimeError):
    """A failed Strata operation, with where it failed (None where it does not apply)."""

    code: str
    """'invalid_argument', 'timeout', 'peer_failure', 'transport', 'aborted' or 'internal'."""
    rank: int | None
    peer: int | None
    group: str | None
    op: str | None
    seq: int | None


class ReduceOp(enum.Enum):
    """Reduction operator; every operation also takes its name."""

    sum = 0

    prod = 1

    max = 2

    min = 3

    avg = 4
    """sum / group size (integers truncate)"""

    band = 5
    """bitwise and (integers, bool)"""

    bor = 6
    """bitwise or (integers, bool)"""

    bxor = 7
    """bitwise xor (integers, bool)"""

class Work:
    """Handle of an operation in flight; holds its buffers until done."""

    def wait(self, timeout: float | None = None) -> None:
        """
        Blocks until the operation completes. Raises strata.Error if it failed. With `timeout` (seconds), also when that passes: the operation keeps running, and a later wait() may still succeed. Without, it waits while the communicator's operations complete; if none completes within the communicator's deadline (plus up to 5 s), the communicator is aborted and this raises. Ctrl-C (SIGINT, while Python's handler is the default one) aborts the communicators being waited on and raises KeyboardInterrupt; their peers fail naming this rank.
        """

    def test(self) -> bool:
        """
        True when complete; raises strata.Error if the operation failed. Never waits for a rank that has not issued the collective yet, but may run on this thread (to its end, as wait() would) a queued collective that every rank of a group on one node has issued, when no other thread is running the queue.
        """

    @property
    def elapsed_seconds(self) -> float:
        """
        Seconds from the operation's start to its completion (0 until complete).
        """

    @property
    def source(self) -> int:
        """
        The rank a completed recv received from (what ANY_SOURCE matched); -1 for other operations and before completion.
        """

class Communicator:
    """
    A group of ranks. Operations return a Work at once and complete in issue order; buffers are used in place, never copied.
    """

    @staticmethod
    def from_env(name: str = 'world', timeout: float | None = None) -> Communicator:
        """
        Joins the job of mpirun (OMPI_COMM_WORLD_*) or torchrun (RANK, WORLD_SIZE, MASTER_ADDR, ...). Collective. `timeout`: deadline of every operation in seconds (default STRATA_TIMEOUT, 300 s).
        """

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def name(self) -> str: ...

    def __repr__(self) -> str: ...

    def split(self, color: int, key: int = 0, name: str | None = None, timeout: float | None = None) -> Communicator | None:
        """
        Collective: ranks passing the same color form a communicator, ordered by (key, rank). Returns None on a rank passing a negative color. It keeps this communicator's deadline unless `timeout` (seconds) is given.
        """

    def shrink(self, exclude: Sequence[int], name: str | None = None, timeout: float | None = None) -> Communicator:
        """
        A new communicator of this one's ranks less `exclude` (e.g. the dead ones), in their order, like ncclCommShrink: built through the store, so it works after this group failed. Collective over the survivors, who pass the same list. Raises strata.Error (code 'invalid_argument') for a rank out of range, repeated, or this rank's own. Keeps this communicator's deadline unless `timeout` (seconds) is given.
        """

    def abort(self) -> None:
        """
        Ends the group at once: pending and later operations fail with code 'aborted', and so do the other ranks', naming this rank ("rank 0 aborted the communicator").
        """

    def alloc_symmetric(self, nbytes: int) -> Any:
        """
        Collective: `nbytes` of zeroed memory as a numpy uint8 array (view it as any dtype), mapped by the other ranks when the group shares one node: all_gather, all_to_all and all_to_allv read an input lying in it from its owner's memory, one copy instead of two. Every rank passes the same size; drop it on every rank after its last call.
        """

    def check_health(self) -> None:
        """
        Raises strata.Error with the failure this group has met (code 'peer_failure' or 'aborted', naming the rank) after a look that costs no message: a peer's process on this machine gone, a failure notice, a broken connection. Returns None if there is none; never waits for other ranks.
        """

    def issue_from_this_thread(self) -> None:
        """
        Collectives are issued by one thread per communicator, the one that created it (so that every rank issues them in one order); another thread's are refused with code 'invalid_argument'. Hands the issuing to the calling thread: call it on every rank at the same point, with nothing being issued meanwhile.
        """

    def on_stream(self, stream: object) -> Communicator:
        """
        This communicator with its calls on CUDA tensors ordered on `stream` (a torch.cuda.Stream, or a cudaStream_t as an int; 0 is the legacy default stream) instead of the communicator's own, as NCCL orders them (docs/device.md). Host calls are unaffected; the copy shares this group.
        """

    def flight_record(self) -> str:
        """
        The last operations of this communicator as a table (for debugging hangs).
        """

    def job_topology(self) -> dict[str, Any]:
        """
        Collective: the whole job's topology as a dict with 'nodes', 'ranks' and 'node_of_rank'.
        """

    def all_reduce(self, input: _BufferLike, output: _BufferLike | None = None, op: ReduceOp | str = 'sum') -> Work:
        """
        Element-wise reduction; every rank receives the result in output (in input when output is None).
        """

    def reduce_scatter(self, input: _BufferLike, output: _BufferLike, op: ReduceOp | str = 'sum') -> Work:
        """
        input has size * output.size elements; rank r receives block r of the reduction.
        """

    def all_gather(self, input: _BufferLike, output: _BufferLike) -> Work:
        """output has size * input.size elements; block r is rank r's input."""

    def all_to_all(self, input: _BufferLike, output: _BufferLike) -> Work:
        """
        size equal blocks: block j of input goes to rank j, block i of output comes from rank i.
        """

    def all_to_allv(self, input: _BufferLike, send_counts: Sequence[int], output: _BufferLike, recv_counts: Sequence[int], send_displs: Sequence[int] | None = None, recv_displs: Sequence[int] | None = None) -> Work:
        """
        all_to_all with per-rank counts (in elements); displacements default to the prefix sums of the counts.
        """

    def broadcast(self, buffer: _BufferLike, root: int = 0) -> Work:
        """Copies root's buffer into every rank's buffer."""

    def reduce(self, input: _BufferLike, output: _BufferLike | None = None, op: ReduceOp | str = 'sum', root: int = 0) -> Work:
        """
        Reduction delivered to root only (into input when output is None there); output is ignored, and may be None, on other ranks.
        """

    def gather(self, input: _BufferLike, output: _BufferLike | None = None, root: int = 0) -> Work:
        """
        root receives size * input.size elements in rank order; output may be None elsewhere.
        """

    def scatter(self, input: _BufferLike | None, output: _BufferLike, root: int = 0) -> Work:
        """
        root sends block r of input (size * output.size elements) to rank r; input may be None elsewhere.
        """

    def send(self, buffer: _BufferLike, peer: int, tag: int = 0) -> Work:
        """Sends to peer; messages of one pair and tag match in issue order."""

    def recv(self, buffer: _BufferLike, peer: int, tag: int = 0) -> Work:
        """Receives from peer (or strata.ANY_SOURCE: Work.source says which) into buffer."""

    def send_recv(self, ops: Sequence[tuple[str, _BufferLike, int] | tuple[str, _BufferLike, int, int]]) -> list[Work]:
        """
        Sends and receives issued together, as torch's batch_isend_irecv: each op is ("send" or "recv", buffer, peer[, tag]). On CUDA buffers that NCCL moves they go in one NCCL group, so a ring where every rank sends before it receives cannot deadlock; host ones progress together anyway. Every op is checked before any is issued. Returns one Work per op, in order.
        """

    def barrier(self) -> Work:
        """Completes when every rank has entered it."""

class Mesh:
    """
    The parallel layout tp x cp x ep x dp x pp of a job (Megatron rank order), with one communicator per dimension.
    """

    def __init__(self, world: Communicator, *, tp: int = 1, pp: int = 1, dp: int = 0, cp: int = 1, ep: int = 1, allow_cross_node_tp: bool = False) -> None:
        """Collective over world. dp=0 takes what the other dimensions leave."""

    def group(self, dims: str | Sequence[str]) -> Communicator:
        """
        This rank's communicator along one dimension ('tp') or several (('dp', 'cp')). The first request of a combination is collective over the world, in the same order on every rank.
        """

    def group_ranks(self, dims: str | Sequence[str]) -> list[int]:
        """World ranks of group(dims) in group-rank order. No communication."""

    def coord(self, dim: str) -> int:
        """This rank's coordinate along dim, which is its rank in group(dim)."""

    @property
    def shape(self) -> dict[str, Any]:
        """
        The sizes, dp resolved: {'tp': ..., 'cp': ..., 'ep': ..., 'dp': ..., 'pp': ...}.
        """

    @property
    def world(self) -> Communicator: ...

    @property
    def topology(self) -> dict[str, Any]:
        """
        The job topology gathered at creation, as Communicator.job_topology() gives it.
        """

def node_topology() -> dict[str, Any]:
    """
    This node's hardware (detect_node(): STRATA_TOPO_FILE or live hwloc) as a dict: id, hostname, source, cpu_model, packages, cores, pus, numa, devices, links.
    """

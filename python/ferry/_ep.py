"""ferry.EpLayer: expert-parallel dispatch and combine on PyTorch tensors.

The C++ semantics (include/ferry/ep.hpp) with tensors in and out, on the current
CUDA stream. What dispatch returns are tensors over the layer's own GPU memory,
valid until the next dispatch on the same layer (the tensors keep that memory
alive, not its contents). They are not torch views of one another or of the
layer's cached region tensors (NOTE [no views over library memory], _memory.py).
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple, Union

import torch
import torch.distributed as dist

from . import _C
from ._checks import InvalidArgument, current_stream, ferry_dtype, tensor_view
from ._comm import Communicator, init
from ._memory import device_tensor, standalone

MODES = {"high_throughput": _C.EpMode.high_throughput, "low_latency": _C.EpMode.low_latency}
LAYOUTS = {"expanded": _C.EpLayout.expanded, "rank_rows": _C.EpLayout.rank_rows}
DISPATCH_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)
SCALE_BLOCK = 128  # fp8: one float32 scale per 128 columns
# Call and argument names, as the compiled module's checks name them too
# (python/csrc/ops.cpp, NOTE [EP argument names]).
_DISPATCH, _COMBINE = "EpLayer.dispatch", "EpLayer.combine"
_SCALES = "input[1] (scales)"


@dataclasses.dataclass
class EpSpec:
    """What an EpLayer was built for; the argument checks need nothing else."""
    max_tokens: int
    hidden: int
    topk: int
    num_experts: int
    world_size: int
    dtype: torch.dtype = torch.bfloat16
    weight_dtype: torch.dtype = torch.float32
    device: Optional[torch.device] = None
    mode: str = "high_throughput"
    num_sms: int = 0
    expert_alignment: int = 1
    max_recv_rows: int = 0
    layout: str = "expanded"
    # rank_rows only: this rank's own rows first, one per token (docs/python.md);
    # the C++ checks (validate) reject it with "expanded" or a small max_recv_rows.
    own_rows_first: bool = False
    # rank_rows inside one node only: combine pulls the peers' rows from where they
    # wrote them, EpLayer.combine_input() (docs/python.md); "expanded" is rejected.
    zero_copy_combine: bool = False

    def dims(self) -> "_C.EpDims":
        """Sizes derived from the config (local_experts, capacity_per_expert,
        capacity_rows, index_capacity), by the one C++ rule (src/ep/ep_args.hpp)."""
        return _C.ep_dims(self.config(), self.world_size)

    @property
    def local_experts(self) -> int:
        return self.dims().local_experts

    def config(self) -> "_C.EpConfig":
        """The C++ EpConfig of this spec (mode, layout and dtype must be valid)."""
        config = _C.EpConfig()
        config.max_tokens_per_rank = self.max_tokens
        config.hidden = self.hidden
        config.topk = self.topk
        config.num_experts = self.num_experts
        config.dispatch_type = ferry_dtype(self.dtype)
        config.with_weights = True  # NOTE [EpLayer unweighted dispatch]
        config.num_sms = self.num_sms
        config.mode = MODES[self.mode]
        config.expert_alignment = self.expert_alignment
        config.max_recv_rows = self.max_recv_rows
        config.layout = LAYOUTS[self.layout]
        config.own_rows_first = self.own_rows_first
        config.zero_copy_combine = self.zero_copy_combine
        return config

    def validate(self) -> "EpSpec":
        """The Python-only choices here; the sizes by the C++ rules (the ones
        EpBuffer applies), so both reject the same configs."""
        where = "EpLayer"
        if self.mode not in MODES:
            raise InvalidArgument(f"{where}: mode must be 'high_throughput' or 'low_latency', got {self.mode!r}")
        if self.dtype not in DISPATCH_DTYPES:
            raise InvalidArgument(f"{where}: dtype must be torch.bfloat16 or torch.float8_e4m3fn, got {self.dtype}")
        if self.weight_dtype != torch.float32:
            raise InvalidArgument(f"{where}: weight_dtype must be torch.float32, got {self.weight_dtype}")
        if self.layout not in LAYOUTS:
            raise InvalidArgument(f"{where}: layout must be 'expanded' or 'rank_rows', got {self.layout!r}")
        if not isinstance(self.own_rows_first, bool):
            raise InvalidArgument(f"{where}: own_rows_first must be a bool, got {type(self.own_rows_first).__name__}")
        if not isinstance(self.zero_copy_combine, bool):
            raise InvalidArgument(f"{where}: zero_copy_combine must be a bool, got "
                                  f"{type(self.zero_copy_combine).__name__}")
        # rank_rows with low_latency: ferry.NotSupported from here (across nodes: from EpBuffer).
        _C.validate_ep_config(self.config(), self.world_size)
        return self


def split_input(where: str, input) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """`input` is a tensor, or (fp8 tokens, scales)."""
    if isinstance(input, (tuple, list)):
        if len(input) != 2:
            raise InvalidArgument(f"{where}: input must be a tensor or a (float8 tokens, scales) pair, "
                                  f"got a sequence of {len(input)}")
        return input[0], input[1]
    return input, None


def _rows(tokens: torch.Tensor) -> int:
    return tokens.shape[0] if tokens.dim() > 0 else 0


def _dispatch_views(input, exp_indices, weight, indices_required: bool = True):
    """The torch side of dispatch's checks; -> (tokens, [tokens, exp_indices,
    weight, scales] views). The C++ checks do the rest."""
    tokens, scales = split_input(_DISPATCH, input)
    views = [tensor_view(tokens, _DISPATCH, "input", required=True),
             tensor_view(exp_indices, _DISPATCH, "exp_indices", required=indices_required),
             tensor_view(weight, _DISPATCH, "weight"),
             tensor_view(scales, _DISPATCH, _SCALES, required=scales is not None)]
    return tokens, views


def _device_index(device: Optional[torch.device]) -> int:
    return -1 if device is None else device.index


def check_dispatch_args(spec: EpSpec, input, exp_indices, weight) -> None:
    """EpLayer.dispatch's checks without a layer (no GPU needed): the torch side,
    then the C++ checks EpBuffer.dispatch runs. spec.device None: the tensors'
    device is not checked."""
    tokens, views = _dispatch_views(input, exp_indices, weight)
    if weight is None:  # NOTE [EpLayer unweighted dispatch]
        views[2] = tensor_view(torch.ones((_rows(tokens), spec.topk), dtype=torch.float32, device=tokens.device))
    _C.validate_ep_dispatch(spec.config(), spec.world_size, *views, device=_device_index(spec.device))


def check_combine_args(spec: EpSpec, expert_output, num_tokens: int, num_rows: int, out) -> None:
    """EpLayer.combine's checks without a layer, after a dispatch of `num_tokens`
    tokens into `num_rows` rows (high-throughput; -1: unknown): the torch side,
    then the C++ checks EpBuffer.combine runs. `out` is checked when given."""
    _C.validate_ep_combine(spec.config(), spec.world_size,
                           tensor_view(expert_output, _COMBINE, "expert_output", required=True),
                           tensor_view(out, _COMBINE, "out"), num_tokens, num_rows,
                           device=_device_index(spec.device))


def _group_size(group) -> Optional[int]:
    """The size of the group init(group) uses, without a collective; None for an
    MPI launch (MPI tells once it runs)."""
    if isinstance(group, Communicator):
        return group.size
    if group is not None or dist.is_initialized():
        return dist.get_world_size(group)
    return None


@dataclasses.dataclass
class EpLayout:
    """The routing of one dispatch: what combine needs, and the per-expert rows.
    kind "expanded": one output row per (token, local expert); "rank_rows": one
    per (token, source rank), with the fields below the handle (docs/python.md)."""
    expert_counts: torch.Tensor        # CUDA int32 [local_experts]: real rows per expert
    # CUDA int64 [local_experts + 1]: first row of each expert, then the end (rank_rows:
    # first entry of each expert in expert_rows, then the end)
    expert_offsets: torch.Tensor
    host_expert_counts: Optional[List[int]]  # high-throughput: the counts on the host; low-latency, sync=False: None
    num_rows: int                      # high-throughput: rows of output (padding included); low-latency, sync=False: -1
    scales: Optional[torch.Tensor]     # fp8: float32 [rows, hidden // 128]; else None
    num_tokens: int                    # tokens this rank dispatched
    local_experts: int
    handle: "_C.EpHandle" = dataclasses.field(repr=False)  # the buffer rejects another layer's or a stale one
    kind: str = "expanded"             # the layer's layout: "expanded" or "rank_rows"
    # rank_rows only (else None / -1):
    row_experts: Optional[torch.Tensor] = None     # CUDA int32 [num_rows, topk]: local expert of each slot, -1: not here
    expert_rows: Optional[torch.Tensor] = None     # CUDA int32 [num_index_entries]: per expert its rows, ascending; padding -1
    # CUDA int64 [world + 1]: first row of each source rank, then the end (own_rows_first: this
    # rank's rows at 0, then the others in rank order; a source's rows end where the next one in that order starts)
    source_offsets: Optional[torch.Tensor] = None
    # CUDA int32 [world]: rows from each source rank (its rows: source_offsets[s] + [0, source_rows[s]), either order)
    source_rows: Optional[torch.Tensor] = None
    num_index_entries: int = -1                    # entries of expert_rows (expert_offsets[-1], padding included)


@dataclasses.dataclass(frozen=True)
class EpRouting:
    """What EpLayer.route returns: the routing layout of exp_indices, made ahead of the
    dispatch that takes it as reuse=."""
    handle: "_C.EpHandle" = dataclasses.field(repr=False)
    num_tokens: int


@dataclasses.dataclass(frozen=True)
class EpDispatchHandle:
    """What EpLayer.dispatch_send returns and dispatch_recv takes."""
    handle: "_C.EpHandle" = dataclasses.field(repr=False)
    num_tokens: int
    weighted: bool  # dispatch_send got weights (else dispatch_recv returns weights None)


class EpLayer:
    """Dispatch tokens to the ranks holding their top-k experts and combine the
    weighted expert outputs back (see docs/python.md). Collective to create."""

    def __init__(self, group, max_tokens: int, hidden: int, topk: int, num_experts: int,
                 dtype: torch.dtype = torch.bfloat16, weight_dtype: torch.dtype = torch.float32,
                 num_sms: int = 0, mode: str = "high_throughput", *, expert_alignment: int = 1,
                 max_recv_rows: int = 0, layout: str = "expanded", own_rows_first: bool = False,
                 zero_copy_combine: bool = False) -> None:
        self._owns_comm = not isinstance(group, Communicator)
        size = _group_size(group)
        spec = EpSpec(int(max_tokens), int(hidden), int(topk), int(num_experts), size or 0, dtype, weight_dtype,
                      None, mode, int(num_sms), int(expert_alignment), int(max_recv_rows), layout, own_rows_first,
                      zero_copy_combine)
        if size is not None:
            spec.validate()  # before anything touches the group (init is collective)
        comm = init(group)
        spec.world_size, spec.device = comm.size, torch.device("cuda", comm.device)
        self.spec = spec if size is not None else spec.validate()
        self.comm = comm
        self.device = spec.device
        self._rank = comm.rank
        self._buffer = _C.EpBuffer(comm, spec.config())
        # NOTE [EpLayer unweighted dispatch]: the buffer always carries weights, so a
        # dispatch without them sends 1.0 per (token, expert): combine's fp32 sum of
        # 1.0 * x is exactly the unweighted sum. Made here, not in a call (nothing is
        # launched before a call's checks), and only read, so graph captures may use it.
        self._ones = torch.ones((spec.max_tokens, spec.topk), dtype=torch.float32, device=self.device)
        self._views: dict = {}  # region name -> (pointer, tensor over the whole region)

    # ---------------------------------------------------------------- properties
    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self.spec.world_size

    @property
    def local_experts(self) -> int:
        return self.spec.local_experts

    @property
    def mode(self) -> str:
        return self.spec.mode

    @property
    def layout(self) -> str:
        return self.spec.layout

    @property
    def own_rows_first(self) -> bool:
        return self.spec.own_rows_first

    @property
    def zero_copy_combine(self) -> bool:
        return self.spec.zero_copy_combine

    def _live(self, where: str) -> "_C.EpBuffer":
        if self._buffer is None:
            raise _C.Error(f"EpLayer.{where}: the layer was finalized")
        return self._buffer

    def _view(self, name: str, pointer: int, shape: Tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A tensor over one of the buffer's regions, made once: the regions stay put,
        so later dispatches (and graph captures) only slice it (into standalone
        tensors: NOTE [no views over library memory])."""
        cached = self._views.get(name)
        if cached is None or cached[0] != pointer:
            cached = (pointer, device_tensor(pointer, shape, dtype, self.device, self._buffer))
            self._views[name] = cached
        return cached[1]

    # ---------------------------------------------------------------- operations
    def route(self, exp_indices: torch.Tensor) -> EpRouting:
        """The routing layout of exp_indices alone, on the current stream: the first step of a
        dispatch, run ahead of it (e.g. on a side stream beside other work once the router is
        done; the dispatch's stream must wait for it). dispatch(..., reuse=routing) then skips
        that step. It replaces the layer's layout: the previous dispatch's layout is stale
        afterwards, and on the GPU route must come after the previous combine."""
        buffer = self._live("route")
        view = tensor_view(exp_indices, "EpLayer.route", "exp_indices", required=True)
        handle = buffer.route(view, current_stream(self.device))
        return EpRouting(handle, int(exp_indices.shape[0]))

    def dispatch(self, input: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
                 exp_indices: Optional[torch.Tensor], weight: Optional[torch.Tensor] = None, *, sync: bool = True,
                 reuse: Optional[Union[EpLayout, EpRouting]] = None):
        """-> (output, weights, layout). See docs/python.md for the shapes per mode and layout.
        sync=False (high-throughput): no host synchronization, so the call can be captured in a
        CUDA graph; the outputs then span the layer's capacity and the counts stay on the GPU
        (NOTE [EpLayer dispatch without sync]). reuse=layout (the latest one): new tokens and
        weights with that dispatch's routing, skipping the routing step (exp_indices is ignored
        and may be None); reuse=routing (what route returned): that routing, made ahead."""
        buffer = self._live("dispatch")
        synced = self._synced(sync, "dispatch")
        num_tokens, views = self._send_views(input, exp_indices, weight, reuse)
        # The buffer checks the arguments (src/ep/ep_args.hpp) before launching anything.
        result = buffer.dispatch(*views, current_stream(self.device), sync_counts=synced,
                                 reuse=self._reused(reuse, "dispatch"))
        return self._outputs(result, num_tokens, weight is not None)

    def dispatch_send(self, input: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
                      exp_indices: Optional[torch.Tensor], weight: Optional[torch.Tensor] = None, *,
                      reuse: Optional[Union[EpLayout, EpRouting]] = None) -> "EpDispatchHandle":
        """The send half of dispatch: queues the writes to the peers and returns; other work may
        run on the stream before dispatch_recv. Order on one layer: dispatch_send, dispatch_recv,
        combine_send, combine_recv."""
        buffer = self._live("dispatch_send")
        num_tokens, views = self._send_views(input, exp_indices, weight, reuse)
        handle = buffer.dispatch_send(*views, current_stream(self.device), reuse=self._reused(reuse, "dispatch_send"))
        return EpDispatchHandle(handle, num_tokens, weight is not None)

    def dispatch_recv(self, handle: "EpDispatchHandle", *, sync: bool = True):
        """The receive half: waits (on the device) for the peers' rows; -> what dispatch returns."""
        buffer = self._live("dispatch_recv")
        if not isinstance(handle, EpDispatchHandle):
            raise InvalidArgument(f"EpLayer.dispatch_recv: handle must be what dispatch_send returned, got "
                                  f"{type(handle).__name__}")
        synced = self._synced(sync, "dispatch_recv")
        result = buffer.dispatch_recv(handle.handle, current_stream(self.device), sync_counts=synced)
        return self._outputs(result, handle.num_tokens, handle.weighted)

    def _synced(self, sync, where: str) -> bool:
        if not isinstance(sync, bool):
            raise InvalidArgument(f"EpLayer.{where}: sync must be a bool, got {type(sync).__name__}")
        return self.spec.mode == "high_throughput" and sync

    def _reused(self, reuse, where: str):
        if reuse is None:
            return None
        if not isinstance(reuse, (EpLayout, EpRouting)):
            raise InvalidArgument(f"EpLayer.{where}: reuse must be the EpLayout of this layer's latest dispatch "
                                  f"or the EpRouting of its latest route, got {type(reuse).__name__}")
        return reuse.handle

    def _send_views(self, input, exp_indices, weight, reuse):
        """The torch side of a dispatch's checks; -> (num_tokens, views). With reuse, exp_indices
        may be None (the buffer ignores it)."""
        tokens, views = _dispatch_views(input, exp_indices, weight, indices_required=reuse is None)
        num_tokens = _rows(tokens)
        if weight is None:  # NOTE [EpLayer unweighted dispatch]
            views[2] = tensor_view(self._ones[:num_tokens])
        return num_tokens, views

    def _outputs(self, result, num_tokens: int, weighted: bool):
        """(output, weights, layout) over the buffer's regions for one dispatch result."""
        spec = self.spec
        synced = result.num_rows >= 0  # high-throughput with the counts synchronized
        high_throughput = spec.mode == "high_throughput"
        rank_rows = spec.layout == "rank_rows"  # high-throughput only (EpSpec.validate)
        local = result.local_experts
        capacity_rows = result.capacity_rows
        # NOTE [EpLayer dispatch without sync]
        # Unsynchronized, the host knows no row count: output, weights, scales and
        # row_experts span capacity_rows (rows past the real ones hold nothing
        # meaningful), expert_rows spans index_capacity, num_rows and
        # num_index_entries are -1 and host_expert_counts is None. The real extents
        # are on the GPU (expert_counts, expert_offsets, source_offsets), and combine
        # takes expert_output of capacity_rows rows (the C++ check then needs rows >= 0).
        rows = result.num_rows if synced else capacity_rows
        rows_shape = (rows,) if high_throughput else (local, result.capacity_per_expert)
        output = self._view("tokens", result.tokens, (capacity_rows, spec.hidden), spec.dtype)[:rows]
        output = standalone(output.view(rows_shape + (spec.hidden,)))
        weights = None
        if weighted and rank_rows:  # [rows, topk]: each slot's weight, 0 where not here
            weights = self._view("row_weights", result.row_weights, (capacity_rows, spec.topk), torch.float32)
            weights = standalone(weights[:rows])
        elif weighted:
            weights = self._view("weights", result.weights, (capacity_rows,), torch.float32)[:rows]
            weights = standalone(weights.view(rows_shape))
        scales = None
        if spec.dtype == torch.float8_e4m3fn:
            scales = self._view("scales", result.scales, (capacity_rows, spec.hidden // SCALE_BLOCK), torch.float32)
            scales = standalone(scales[:rows])
        rank_rows_fields = {}
        if rank_rows:
            entries = result.num_index_entries if synced else result.index_capacity  # -1 unsynced
            row_experts = self._view("row_experts", result.row_experts, (capacity_rows, spec.topk), torch.int32)
            expert_rows = self._view("expert_rows", result.expert_rows, (result.index_capacity,), torch.int32)
            rank_rows_fields = dict(
                kind="rank_rows", row_experts=standalone(row_experts[:rows]),
                expert_rows=standalone(expert_rows[:entries]),
                source_offsets=self._view("source_offsets", result.source_offsets, (spec.world_size + 1,),
                                          torch.int64),
                source_rows=self._view("source_rows", result.source_rows, (spec.world_size,), torch.int32),
                num_index_entries=result.num_index_entries)
        layout = EpLayout(
            expert_counts=self._view("expert_counts", result.expert_counts, (local,), torch.int32),
            expert_offsets=self._view("expert_offsets", result.expert_offsets, (local + 1,), torch.int64),
            host_expert_counts=list(result.host_expert_counts) if synced else None,
            num_rows=result.num_rows,
            scales=scales, num_tokens=num_tokens, local_experts=local, handle=result.handle, **rank_rows_fields)
        return output, weights, layout

    def combine_input(self) -> torch.Tensor:
        """zero_copy_combine only: bf16 [rows, hidden] over this rank's part of the layer's
        symmetric memory (rows: the most a dispatch can put on this rank), where the peers'
        combines read this rank's rows. Write the combine's input there (row i: the weighted sum over this
        rank's experts of dispatch output row i), after this rank's dispatch of the call in
        stream order, and pass this tensor (or a slice of it from row 0) as expert_output to
        every combine / combine_send of the layer. The same memory for every call."""
        buffer = self._live("combine_input")
        if not self.spec.zero_copy_combine:
            raise InvalidArgument("EpLayer.combine_input: the layer was built without zero_copy_combine=True")
        view = buffer.combine_input()
        return standalone(self._view("combine_input", view.data, tuple(view.shape), torch.bfloat16))

    def combine(self, expert_output: torch.Tensor, layout: EpLayout, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """-> [num_tokens, hidden] bf16: per token, the (weighted) sum of its experts' outputs
        (rank_rows: of its rows, one already-weighted row per rank it reached). zero_copy_combine:
        expert_output must be combine_input() (the same memory), else InvalidArgument."""
        buffer = self._live("combine")
        self._check_layout(layout, "combine")
        expert_view = tensor_view(expert_output, _COMBINE, "expert_output", required=True)
        out, out_view = self._out(out, layout, _COMBINE)
        # The buffer checks the arguments, the layout's handle included, before launching anything.
        buffer.combine(expert_view, layout.handle, out_view, current_stream(self.device))
        return out

    def combine_send(self, expert_output: torch.Tensor, layout: EpLayout) -> None:
        """The send half of combine: queues this rank's partial sums to the tokens' home ranks.
        Rank rows: combine_recv reads this rank's own rows from expert_output in place, so it
        must stay as it is until combine_recv has run on the device."""
        buffer = self._live("combine_send")
        self._check_layout(layout, "combine_send")
        expert_view = tensor_view(expert_output, "EpLayer.combine_send", "expert_output", required=True)
        buffer.combine_send(expert_view, layout.handle, current_stream(self.device))

    def combine_recv(self, layout: EpLayout, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The receive half: waits (on the device) for the partial sums; -> [num_tokens, hidden] bf16."""
        buffer = self._live("combine_recv")
        self._check_layout(layout, "combine_recv")
        out, out_view = self._out(out, layout, "EpLayer.combine_recv")
        buffer.combine_recv(layout.handle, out_view, current_stream(self.device))
        return out

    @staticmethod
    def _check_layout(layout, where: str) -> None:
        if not isinstance(layout, EpLayout):
            raise InvalidArgument(f"EpLayer.{where}: layout must be the EpLayout this layer's dispatch returned, "
                                  f"got {type(layout).__name__}")

    def _out(self, out: Optional[torch.Tensor], layout: EpLayout, where: str):
        """-> (out, its view): the caller's, or a new [num_tokens, hidden] bf16 tensor."""
        if out is not None:
            return out, tensor_view(out, where, "out")
        out = torch.empty((layout.num_tokens, self.spec.hidden), dtype=torch.bfloat16, device=self.device)
        return out, tensor_view(out)

    def barrier(self) -> None:
        """Waits for this rank's work on the current stream (raising any device
        error), then for every rank of the group."""
        buffer = self._live("barrier")
        self.comm.synchronize(current_stream(self.device))
        buffer.check_errors()
        self.comm.barrier()

    def finalize(self) -> None:
        """Collective: waits for every rank (barrier), then drops the layer's
        resources. Later calls raise ferry.Error. GPU memory is returned when the
        communicator goes (with the layer when it made its own, from a group)."""
        if self._buffer is None:
            return
        self.barrier()
        self._buffer = None
        self._ones = None
        self._views = {}
        if self._owns_comm:
            self.comm = None  # type: ignore[assignment]


__all__ = ["EpDispatchHandle", "EpLayer", "EpLayout", "EpRouting", "EpSpec", "check_dispatch_args",
           "check_combine_args"]

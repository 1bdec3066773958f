"""ferry's Python argument checks, no GPU needed (CPU tensors only).

The validators are the ones the GPU entry points run before any device work:
ferry._checks.check_tensor, ferry._ep.EpSpec(.validate), and for EP calls check_dispatch_args and
check_combine_args: the torch side (ferry._checks.tensor_view) then the C++
checks EpBuffer runs itself (src/ep/ep_args.hpp, reached through ferry._C).
A non-tensor is a TypeError, anything else a ferry.InvalidArgument naming the
argument and what was expected. AllReduce's: test_cpu_allreduce_args.py. Specs here use device=None (no device check) so
that the checks before it can be reached one by one with CPU tensors; the device
check itself is exercised with device=cuda:0 (a CPU tensor must then be rejected).
"""
import dataclasses

import pytest
import torch

import ferry
from _helpers import ep_spec as _spec, ep_spec_invalid as _spec_invalid, expect_error, expect_invalid, names, non_contiguous

CUDA0 = torch.device("cuda", 0)
BF16, FP8, F32 = torch.bfloat16, torch.float8_e4m3fn, torch.float32


# ---------------------------------------------------------------- the package
def test_loaded_ucx_is_the_one_built_with():
    """The module runs with the UCX it was built with, or a newer one (issue 24: an
    installed copy loaded a system libucp 1.13 under 1.22 headers)."""
    v = ferry.ucx_versions()
    if not v.built_with_ucx:
        pytest.skip("built without UCX")
    assert not v.loaded_older(), (f"built with UCX {v.built_major}.{v.built_minor}, loaded "
                                  f"{v.loaded_major}.{v.loaded_minor}.{v.loaded_release} from {v.loaded_library}")
    assert "libucp" in v.loaded_library
    ferry._C.check_ucx_version()  # does not raise


def test_nccl_shim_ships_with_the_package():
    """libferry_nccl.so sits next to the module and exports NCCL's API (it loads NCCL only when called)."""
    import ctypes
    path = ferry.nccl_shim_path()
    if path is None:
        pytest.skip("built without the NCCL drop-in (no nccl.h)")
    shim = ctypes.CDLL(path)
    for name in ("ncclAllReduce", "ncclCommInitRank", "ncclGetUniqueId", "ncclGroupStart", "ncclCommSplit"):
        assert hasattr(shim, name), name


def test_import_and_public_names():
    for name in ("init", "Communicator", "AllReduce", "EpLayer", "EpLayout", "Error", "InvalidArgument",
                 "TimeoutError"):
        assert hasattr(ferry, name), f"ferry.{name} missing"


def test_cpp_messages_format_numbers_with_torch_loaded():
    """The C++ side formats numbers (shapes, sizes) into its messages inside a
    process that already holds torch's libstdc++: a second, static copy in the
    module would crash here (NOTE [one libstdc++ per process])."""
    view = ferry._C.TensorView(0, ferry._C.DataType.bfloat16, [3, 7168], [7168, 1])
    assert repr(view) == "bfloat16[3, 7168]"
    assert repr(ferry._C.TensorView(0, ferry._C.DataType.int64, [5, 8], [1, 5])) == "int64[5, 8] (non-contiguous)"


def test_exception_hierarchy():
    import builtins

    assert issubclass(ferry.Error, RuntimeError)
    assert issubclass(ferry.InvalidArgument, ferry.Error)
    assert issubclass(ferry.InvalidArgument, ValueError)
    assert issubclass(ferry.TimeoutError, ferry.Error)
    assert issubclass(ferry.TimeoutError, builtins.TimeoutError)
    assert ferry.TimeoutError is not builtins.TimeoutError
    # Raised and caught through every base.
    for exc, bases in ((ferry.InvalidArgument, (ferry.Error, RuntimeError, ValueError)),
                       (ferry.TimeoutError, (ferry.Error, RuntimeError, builtins.TimeoutError)),
                       (ferry.Error, (RuntimeError,))):
        for base in bases:
            with pytest.raises(base, match="boom"):
                raise exc("boom")


# ---------------------------------------------------------------- check_tensor
def _check(t, **kw):
    from ferry._checks import check_tensor

    kw.setdefault("dtypes", (BF16,))
    return check_tensor("Thing.call", "arg", t, **kw)


@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, None, "tensor"], ids=["list", "float", "None", "str"])
def test_check_tensor_rejects_non_tensors_with_type_error(bad):
    expect_error(TypeError, lambda: _check(bad, shape=(None, 128)), name="arg")


def test_check_tensor_accepts_valid():
    _check(torch.zeros(3, 128, dtype=BF16), shape=(None, 128))
    _check(torch.zeros(3, 128, dtype=BF16), shape=(3, 128), device=None)
    _check(torch.zeros(0, 128, dtype=BF16), shape=(None, 128))
    for dt in (torch.int32, torch.int64):
        _check(torch.zeros(4, 2, dtype=dt), dtypes=(torch.int32, torch.int64), shape=(4, 2))
    _check(torch.zeros(7, dtype=BF16))  # shape=None: any


def test_check_tensor_dtype():
    msg = expect_invalid(lambda: _check(torch.zeros(3, 128), shape=(None, 128)), "arg", "bfloat16", "float32")
    assert "Thing.call" in msg, msg
    expect_invalid(lambda: _check(torch.zeros(4, 2, dtype=torch.int16), dtypes=(torch.int32, torch.int64)),
                   "arg", "int32", "int64")


@pytest.mark.parametrize("shape", [(128,), (3, 128, 1), (3, 256), (3, 127)])
def test_check_tensor_shape(shape):
    expect_invalid(lambda: _check(torch.zeros(shape, dtype=BF16), shape=(None, 128)), "arg", "128")


def test_check_tensor_exact_sizes():
    expect_invalid(lambda: _check(torch.zeros(4, 128, dtype=BF16), shape=(3, 128)), "arg", "3")
    expect_invalid(lambda: _check(torch.zeros(0, 128, dtype=BF16), shape=(3, 128)), "arg", "3")


def test_check_tensor_contiguity():
    t = non_contiguous(torch.zeros(3, 128, dtype=BF16))
    expect_invalid(lambda: _check(t, shape=(None, 128)), "arg", "contiguous")
    expect_invalid(lambda: _check(torch.zeros(128, 3, dtype=BF16).t(), shape=(None, 128)), "arg", "contiguous")


def test_check_tensor_device():
    # A correct CPU tensor where a CUDA device is required.
    msg = expect_invalid(lambda: _check(torch.zeros(3, 128, dtype=BF16), shape=(None, 128), device=CUDA0),
                         "arg", "cuda")
    assert "CUDA" in msg or "cuda:0" in msg, msg


def test_check_tensor_order():
    """type, dtype, shape, contiguity, device: each failure is reported at its
    stage even when every later check would fail too."""
    wrong_all = non_contiguous(torch.zeros(3, 64))  # dtype, shape, contiguity, device all wrong
    msg = expect_invalid(lambda: _check(wrong_all, shape=(None, 128), device=CUDA0), "arg", "bfloat16")
    assert "cuda" not in msg.lower(), f"dtype stage message mentions the device: {msg!r}"
    wrong_shape = non_contiguous(torch.zeros(3, 64, dtype=BF16))
    msg = expect_invalid(lambda: _check(wrong_shape, shape=(None, 128), device=CUDA0), "arg", "128")
    assert "cuda" not in msg.lower(), f"shape stage message mentions the device: {msg!r}"
    wrong_layout = non_contiguous(torch.zeros(3, 128, dtype=BF16))
    msg = expect_invalid(lambda: _check(wrong_layout, shape=(None, 128), device=CUDA0), "arg", "contiguous")
    assert "cuda" not in msg.lower(), f"contiguity stage message mentions the device: {msg!r}"


# ---------------------------------------------------------------- EpSpec
def test_ep_spec_is_a_dataclass_and_valid_specs_pass():
    assert dataclasses.is_dataclass(_spec())
    for mode in ("high_throughput", "low_latency"):
        for dtype in (BF16, FP8):
            for world, experts in ((1, 1), (1, 3), (2, 8), (4, 8), (8, 256), (6, 12)):
                _spec(mode=mode, dtype=dtype, world_size=world, num_experts=experts, topk=1).validate()
    _spec(topk=16, num_experts=16).validate()
    _spec(hidden=128).validate()
    _spec(hidden=7168).validate()


@pytest.mark.parametrize("hidden", [100, 129, 192, 64])
def test_ep_spec_hidden_multiple_of_128(hidden):
    _spec_invalid("hidden", "128", hidden=hidden)


@pytest.mark.parametrize("topk", [0, -1, 17])
def test_ep_spec_topk_range(topk):
    _spec_invalid("topk", topk=topk, num_experts=32)


@pytest.mark.parametrize("experts,world", [(7, 2), (8, 3), (12, 8), (2, 4)])
def test_ep_spec_experts_divisible_by_world(experts, world):
    _spec_invalid("num_experts", num_experts=experts, world_size=world, topk=1)


@pytest.mark.parametrize("mode", ["bogus", "HIGH", "", "lowlatency"])
def test_ep_spec_mode(mode):
    _spec_invalid("mode", mode=mode)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float8_e5m2, torch.int8])
def test_ep_spec_dtype(dtype):
    _spec_invalid("dtype", dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64, torch.int32])
def test_ep_spec_weight_dtype(dtype):
    _spec_invalid("weight_dtype", weight_dtype=dtype)


def test_ep_spec_layout_valid():
    for dtype in (BF16, FP8):
        for world, experts in ((1, 1), (2, 8), (8, 256)):
            spec = _spec(layout="rank_rows", dtype=dtype, world_size=world, num_experts=experts, topk=1).validate()
            assert spec.config().layout == ferry._C.EpLayout.rank_rows
    for mode in ("high_throughput", "low_latency"):
        assert _spec(mode=mode).validate().config().layout == ferry._C.EpLayout.expanded  # the default
        assert _spec(mode=mode, layout="expanded").validate().config().layout == ferry._C.EpLayout.expanded
    dims = _spec(layout="rank_rows", expert_alignment=16).validate().dims()
    assert dims.capacity_rows > 0 and dims.index_capacity > 0
    assert _spec().dims().index_capacity == 0  # expanded: no index lists


@pytest.mark.parametrize("layout", ["bogus", "", "RANK_ROWS", "rank-rows", "rankrows", "expanded "])
def test_ep_spec_layout(layout):
    _spec_invalid("layout", "expanded", "rank_rows", repr(layout), layout=layout)


def test_ep_spec_rank_rows_needs_high_throughput():
    """rank_rows is a high-throughput layout: low_latency is refused as not
    supported (ferry.NotSupported, a ferry.Error, not an InvalidArgument)."""
    for dtype in (BF16, FP8):
        expect_error(ferry.NotSupported, lambda: _spec(layout="rank_rows", mode="low_latency", dtype=dtype).validate(),
                     "rank_rows", "low_latency", "high_throughput", name="layout")
    # The same rule as EpBuffer's own (the compiled module's config check).
    config = _spec(mode="low_latency").config()
    config.layout = ferry._C.EpLayout.rank_rows
    expect_error(ferry.NotSupported, lambda: ferry._C.validate_ep_config(config, 2), "rank_rows", name="layout")
    # A bad layout string is reported as such, whatever the mode.
    _spec_invalid("layout", "rank_rows", layout="bogus", mode="low_latency")
    # A bad mode before the layout.
    _spec_invalid("mode", layout="rank_rows", mode="bogus")


# ---------------------------------------------------------------- dispatch arguments
T, H, K = 5, 256, 2


def _dispatch(spec, x, idx, w):
    from ferry._ep import check_dispatch_args

    return check_dispatch_args(spec, x, idx, w)


def _x(n=T, h=H, dtype=BF16):
    return torch.randn(n, h).to(dtype)


def _idx(n=T, k=K, dtype=torch.int64):
    return torch.randint(-1, 8, (n, k)).to(dtype)


def _w(n=T, k=K, dtype=F32):
    return torch.rand(n, k).to(dtype)


def _fp8(n=T, h=H):
    return (_x(n, h).to(FP8), torch.rand(n, h // 128))


def test_dispatch_args_valid():
    spec, fp8 = _spec(), _spec(dtype=FP8)
    for idx_dtype in (torch.int32, torch.int64):
        for w in (_w(), None):
            _dispatch(spec, _x(), _idx(dtype=idx_dtype), w)
            _dispatch(fp8, _x(), _idx(dtype=idx_dtype), w)   # bf16 input, quantized in the kernel
            _dispatch(fp8, _fp8(), _idx(dtype=idx_dtype), w)  # fp8 input with its scales
    _dispatch(spec, _x(n=8), _idx(n=8), _w(n=8))  # T == max_tokens
    _dispatch(spec, _x(n=0), _idx(n=0), _w(n=0))  # no tokens
    _dispatch(_spec(mode="low_latency"), _x(n=3), _idx(n=3), None)


def test_dispatch_args_input():
    spec = _spec()
    expect_error(TypeError, lambda: _dispatch(spec, _x().float().numpy(), _idx(), _w()), name="input")
    expect_error(TypeError, lambda: _dispatch(spec, "tokens", _idx(), _w()), name="input")
    expect_invalid(lambda: _dispatch(spec, _x(dtype=F32), _idx(), _w()), "input", "bfloat16")
    expect_invalid(lambda: _dispatch(spec, _x(dtype=torch.float16), _idx(), _w()), "input", "bfloat16")
    expect_invalid(lambda: _dispatch(spec, _x(h=H + 128), _idx(), _w()), "input", str(H))
    expect_invalid(lambda: _dispatch(spec, _x()[0], _idx(), _w()), "input")
    expect_invalid(lambda: _dispatch(spec, _x().unsqueeze(0), _idx(), _w()), "input")
    expect_invalid(lambda: _dispatch(spec, non_contiguous(_x()), _idx(), _w()), "input", "contiguous")
    expect_invalid(lambda: _dispatch(spec, _x(n=9), _idx(n=9), _w(n=9)), "max_tokens")
    # fp8 tokens (bare or as a tuple) need dtype=float8_e4m3fn in the layer.
    expect_invalid(lambda: _dispatch(spec, _fp8(), _idx(), _w()), "input")
    expect_invalid(lambda: _dispatch(spec, _fp8()[0], _idx(), _w()), "input")


def test_dispatch_args_fp8_input():
    spec = _spec(dtype=FP8)
    q, s = _fp8()
    expect_invalid(lambda: _dispatch(spec, q, _idx(), _w()), "input")  # fp8 without its scales
    expect_invalid(lambda: _dispatch(spec, (q.float(), s), _idx(), _w()), "input")
    expect_invalid(lambda: _dispatch(spec, (q, s.to(BF16)), _idx(), _w()), "scales", "float32")
    expect_invalid(lambda: _dispatch(spec, (q, s[:, :1].contiguous()), _idx(), _w()), "scales", str(H // 128))
    expect_invalid(lambda: _dispatch(spec, (q, s[:T - 1]), _idx(), _w()), "scales", str(T))
    expect_invalid(lambda: _dispatch(spec, (q, non_contiguous(s)), _idx(), _w()), "scales", "contiguous")
    expect_invalid(lambda: _dispatch(spec, (non_contiguous(q), s), _idx(), _w()), "input", "contiguous")
    expect_error(TypeError, lambda: _dispatch(spec, (q, s.tolist()), _idx(), _w()), name="scales")
    with pytest.raises((TypeError, ferry.InvalidArgument)):
        _dispatch(spec, (q, s, s), _idx(), _w())
    with pytest.raises((TypeError, ferry.InvalidArgument)):
        _dispatch(spec, (q,), _idx(), _w())


def test_dispatch_args_exp_indices():
    spec = _spec()
    expect_error(TypeError, lambda: _dispatch(spec, _x(), _idx().tolist(), _w()), name="exp_indices")
    for dt in (F32, torch.int16, torch.uint8, BF16):
        expect_invalid(lambda: _dispatch(spec, _x(), _idx(dtype=dt), _w()), "exp_indices", "int32", "int64")
    for shape in ((T, K + 1), (T - 1, K), (T + 1, K), (T,), (T, K, 1)):
        expect_invalid(lambda: _dispatch(spec, _x(), torch.zeros(shape, dtype=torch.int64), _w()), "exp_indices")
    expect_invalid(lambda: _dispatch(spec, _x(), non_contiguous(_idx()), _w()), "exp_indices", "contiguous")


def test_dispatch_args_weight():
    spec = _spec()
    expect_error(TypeError, lambda: _dispatch(spec, _x(), _idx(), _w().tolist()), name="weight")
    for dt in (BF16, torch.float64, torch.float16):
        expect_invalid(lambda: _dispatch(spec, _x(), _idx(), _w(dtype=dt)), "weight", "float32")
    for shape in ((T, K + 1), (T - 1, K), (T,), (T, K, 1)):
        expect_invalid(lambda: _dispatch(spec, _x(), _idx(), torch.zeros(shape)), "weight")
    expect_invalid(lambda: _dispatch(spec, _x(), _idx(), non_contiguous(_w())), "weight", "contiguous")


def test_dispatch_args_rank_rows():
    """The rank_rows layout takes the same dispatch arguments as expanded."""
    spec, fp8 = _spec(layout="rank_rows"), _spec(layout="rank_rows", dtype=FP8)
    for idx_dtype in (torch.int32, torch.int64):
        for w in (_w(), None):
            _dispatch(spec, _x(), _idx(dtype=idx_dtype), w)
            _dispatch(fp8, _x(), _idx(dtype=idx_dtype), w)
            _dispatch(fp8, _fp8(), _idx(dtype=idx_dtype), w)
    _dispatch(spec, _x(n=0), _idx(n=0), _w(n=0))
    expect_invalid(lambda: _dispatch(spec, _x(n=9), _idx(n=9), _w(n=9)), "max_tokens")
    expect_invalid(lambda: _dispatch(spec, _x(dtype=F32), _idx(), _w()), "input", "bfloat16")
    expect_invalid(lambda: _dispatch(spec, _x(), _idx(dtype=F32), _w()), "exp_indices", "int32", "int64")
    expect_invalid(lambda: _dispatch(spec, _x(), _idx(), _w(k=K + 1)), "weight")
    expect_invalid(lambda: _dispatch(fp8, (_fp8()[0], _fp8()[1].to(BF16)), _idx(), _w()), "scales", "float32")
    expect_invalid(lambda: _dispatch(_spec(layout="rank_rows", device=CUDA0), _x(), _idx(), _w()), "input", "cuda")


def test_dispatch_args_device():
    spec = _spec(device=CUDA0)
    msg = expect_invalid(lambda: _dispatch(spec, _x(), _idx(), _w()), "input", "cuda")
    assert "CUDA" in msg or "cuda:0" in msg, msg
    expect_invalid(lambda: _dispatch(_spec(device=CUDA0, dtype=FP8), _fp8(), _idx(), _w()), "input", "cuda")


# ---------------------------------------------------------------- combine arguments
def _combine(spec, y, num_tokens, rows_shape, out):
    """rows_shape: expert_output's shape after the dispatch (high-throughput: its rows)."""
    from ferry._ep import check_combine_args

    num_rows = rows_shape[0] if spec.mode == "high_throughput" else -1
    return check_combine_args(spec, y, num_tokens, num_rows, out)


@pytest.mark.parametrize("mode,rows_shape", [("high_throughput", (11, H)), ("low_latency", (4, 16, H))],
                         ids=["high_throughput", "low_latency"])
def test_combine_args(mode, rows_shape):
    spec = _spec(mode=mode)
    y = torch.zeros(rows_shape, dtype=BF16)
    out = torch.zeros(T, H, dtype=BF16)
    _combine(spec, y, T, rows_shape, None)
    _combine(spec, y, T, rows_shape, out)
    _combine(spec, y, 0, rows_shape, torch.zeros(0, H, dtype=BF16))
    if mode == "high_throughput":
        _combine(spec, torch.zeros(12, H, dtype=BF16), T, rows_shape, out)  # more rows than the dispatch made
        expect_invalid(lambda: _combine(spec, y[:10], T, rows_shape, None), "expert_output", "10", "11")
    else:
        expect_invalid(lambda: _combine(spec, y[:, :15].contiguous(), T, rows_shape, None), "expert_output", "16")
        expect_invalid(lambda: _combine(spec, y[:3].contiguous(), T, rows_shape, None), "expert_output", "4")

    expect_error(TypeError, lambda: _combine(spec, y.tolist(), T, rows_shape, None), name="expert_output")
    for dt in (F32, torch.float16, FP8):
        expect_invalid(lambda: _combine(spec, y.to(dt), T, rows_shape, None), "expert_output", "bfloat16")
    wrong_h = (*rows_shape[:-1], H + 128)
    expect_invalid(lambda: _combine(spec, torch.zeros(wrong_h, dtype=BF16), T, rows_shape, None), "expert_output")
    expect_invalid(lambda: _combine(spec, y.reshape(-1), T, rows_shape, None), "expert_output")
    expect_invalid(lambda: _combine(spec, y.unsqueeze(0), T, rows_shape, None), "expert_output")
    expect_invalid(lambda: _combine(spec, non_contiguous(y), T, rows_shape, None), "expert_output", "contiguous")

    expect_error(TypeError, lambda: _combine(spec, y, T, rows_shape, out.tolist()), name="out")
    expect_invalid(lambda: _combine(spec, y, T, rows_shape, out.float()), "out", "bfloat16")
    for shape in ((T + 1, H), (T - 1, H), (T, H + 128), (T * H,)):
        expect_invalid(lambda: _combine(spec, y, T, rows_shape, torch.zeros(shape, dtype=BF16)), "out")
    expect_invalid(lambda: _combine(spec, y, T, rows_shape, non_contiguous(out)), "out", "contiguous")

    cuda_spec = _spec(mode=mode, device=CUDA0)
    expect_invalid(lambda: _combine(cuda_spec, y, T, rows_shape, None), "expert_output", "cuda")


def test_combine_args_rank_rows():
    """rank_rows: expert_output is bf16 [rows >= num_rows, hidden] (one row per
    dispatched row), out [T, hidden] bf16."""
    spec = _spec(layout="rank_rows")
    y = torch.zeros(7, H, dtype=BF16)
    out = torch.zeros(T, H, dtype=BF16)
    _combine(spec, y, T, (7, H), None)
    _combine(spec, y, T, (7, H), out)
    _combine(spec, torch.zeros(9, H, dtype=BF16), T, (7, H), out)  # more rows than the dispatch made
    _combine(spec, torch.zeros(0, H, dtype=BF16), 0, (0, H), torch.zeros(0, H, dtype=BF16))
    expect_invalid(lambda: _combine(spec, y[:6], T, (7, H), None), "expert_output", "6", "7")
    expect_invalid(lambda: _combine(spec, y.float(), T, (7, H), None), "expert_output", "bfloat16")
    expect_invalid(lambda: _combine(spec, torch.zeros(7, H + 128, dtype=BF16), T, (7, H), None), "expert_output")
    expect_invalid(lambda: _combine(spec, y.reshape(7, 2, H // 2), T, (7, H), None), "expert_output")
    expect_invalid(lambda: _combine(spec, non_contiguous(y), T, (7, H), None), "expert_output", "contiguous")
    expect_invalid(lambda: _combine(spec, y, T, (7, H), torch.zeros(T + 1, H, dtype=BF16)), "out")
    expect_invalid(lambda: _combine(spec, y, T, (7, H), out.float()), "out", "bfloat16")
    expect_error(TypeError, lambda: _combine(spec, y.tolist(), T, (7, H), None), name="expert_output")
    expect_invalid(lambda: _combine(_spec(layout="rank_rows", device=CUDA0), y, T, (7, H), None),
                   "expert_output", "cuda")


def test_names_helper_matches_whole_words():
    assert names("EpLayer.combine: out must be bfloat16", "out")
    assert not names("EpLayer.combine: expert_output must be bfloat16", "out")


# ---------------------------------------------------------------- the EP checks are the C++ ones
def test_ep_dims_come_from_the_cpp_rule():
    for mode, capacity in (("high_throughput", 0), ("low_latency", 2 * 8)):
        spec = _spec(mode=mode)
        dims = spec.dims()
        assert spec.local_experts == dims.local_experts == 8 // 2
        assert dims.capacity_per_expert == capacity
        assert dims.capacity_rows > 0
    assert _spec(max_recv_rows=100).dims().capacity_rows == 100


def test_ep_messages_name_the_values():
    spec = _spec()
    msg = expect_invalid(lambda: _dispatch(spec, _x(n=9), _idx(n=9), _w(n=9)), "max_tokens", "9", "8")
    assert "EpLayer.dispatch" in msg, msg
    expect_invalid(lambda: _dispatch(spec, _x(h=H + 128), _idx(), _w()), "input", str(H), str(H + 128))
    expect_invalid(lambda: _dispatch(spec, _x(), _idx(k=K + 1), _w()), "exp_indices", str(K), str(K + 1))
    strided = torch.zeros(T, 2 * H, dtype=BF16)[:, :H]
    expect_invalid(lambda: _dispatch(spec, strided, _idx(), _w()), "input", "contiguous", str(2 * H))
    # A torch dtype ferry has no counterpart for: named by the torch side.
    expect_invalid(lambda: _dispatch(spec, _x(), _idx(dtype=torch.int16), _w()), "exp_indices", "torch.int16")
    expect_error(TypeError, lambda: _dispatch(spec, _x(), None, _w()), name="exp_indices")
    expect_error(TypeError, lambda: _combine(spec, None, T, (11, H), None), name="expert_output")


def test_ep_checks_are_the_compiled_modules():
    """check_dispatch_args leaves all but the torch side to the checks EpBuffer
    runs (ferry._C.validate_ep_dispatch): the same message either way."""
    from ferry._checks import tensor_view

    spec = _spec()
    x, idx, w = _x(), _idx(dtype=torch.float32), _w()
    via_layer = expect_invalid(lambda: _dispatch(spec, x, idx, w), "exp_indices")
    direct = expect_invalid(lambda: ferry._C.validate_ep_dispatch(
        spec.config(), spec.world_size, tensor_view(x), tensor_view(idx), tensor_view(w), tensor_view(None)),
        "exp_indices")
    assert via_layer == direct


def test_ep_layer_checks_before_the_group(monkeypatch):
    """EpLayer's config checks run before init(group) (collective) is called."""
    import ferry._ep as ep

    def init(group):
        raise AssertionError("init(group) was called before the arguments were checked")

    monkeypatch.setattr(ep, "init", init)
    monkeypatch.setattr(ep, "_group_size", lambda group: 2)
    group = object()
    expect_invalid(lambda: ep.EpLayer(group, 8, 100, 2, 8), "hidden", "128")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 7), "num_experts")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, mode="bogus"), "mode")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, dtype=torch.float16), "dtype")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, layout="bogus"), "layout", "rank_rows")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, layout=None), "layout")
    expect_error(ferry.NotSupported, lambda: ep.EpLayer(group, 8, 256, 2, 8, mode="low_latency", layout="rank_rows"),
                 "low_latency", name="layout")


def test_ep_layout_fields():
    """ferry.EpLayout: the rank_rows fields default to None / -1 and kind to
    "expanded" (what an expanded dispatch returns)."""
    fields = {f.name: f for f in dataclasses.fields(ferry.EpLayout)}
    for name in ("kind", "row_experts", "expert_rows", "source_offsets", "num_index_entries"):
        assert name in fields, f"EpLayout.{name} missing"
    assert fields["kind"].default == "expanded"
    assert fields["row_experts"].default is None and fields["expert_rows"].default is None
    assert fields["source_offsets"].default is None and fields["num_index_entries"].default == -1

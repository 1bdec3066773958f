"""EpConfig::zero_copy_combine from Python, no GPU needed: the option reaches the C++
config, the C++ rules (rank_rows only) reject what EpBuffer would, before any
collective step, and EpLayer.combine_input refuses a layer without the option
(NOTE [EP zero-copy combine] in src/ep/rank_rows_pull_combine.cu)."""
import pytest
import torch

import ferry
from _helpers import (ReachedInit, ep_spec as _spec, ep_spec_invalid as _spec_invalid, expect_error, expect_invalid,
                      layer_stops_at_init)

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn


def test_ep_spec_zero_copy_combine_valid():
    """zero_copy_combine (rank_rows only) reaches the C++ config; off by default;
    it combines with own_rows_first and leaves the sizes as they are."""
    assert _spec().config().zero_copy_combine is False
    assert _spec(layout="rank_rows").validate().config().zero_copy_combine is False
    for dtype in (BF16, FP8):
        for world, experts in ((1, 1), (2, 8), (8, 256)):
            for own in (False, True):
                spec = _spec(layout="rank_rows", zero_copy_combine=True, own_rows_first=own, dtype=dtype,
                             world_size=world, num_experts=experts, topk=1).validate()
                config = spec.config()
                assert spec.zero_copy_combine is True and config.zero_copy_combine is True
                assert config.own_rows_first is own and config.layout == ferry._C.EpLayout.rank_rows
    assert (_spec(layout="rank_rows", zero_copy_combine=True).dims().capacity_rows
            == _spec(layout="rank_rows").dims().capacity_rows)
    config = ferry._C.EpConfig()
    config.zero_copy_combine = True
    assert config.zero_copy_combine is True


def test_ep_spec_zero_copy_combine_needs_rank_rows():
    """The combine input rows are those of rank rows: with the expanded layout
    (either mode) the C++ config check raises ferry.InvalidArgument naming it."""
    for mode in ("high_throughput", "low_latency"):
        for dtype in (BF16, FP8):
            _spec_invalid("zero_copy_combine", "rank_rows", "expanded", layout="expanded", zero_copy_combine=True,
                          mode=mode, dtype=dtype)
    # The same rule as EpBuffer's own (the compiled module's config check).
    config = _spec().config()
    config.zero_copy_combine = True
    expect_invalid(lambda: ferry._C.validate_ep_config(config, 2), "zero_copy_combine", "expanded")
    # rank_rows with low_latency stays ferry.NotSupported (the mode is the problem there).
    expect_error(ferry.NotSupported, lambda: _spec(layout="rank_rows", zero_copy_combine=True,
                                                   mode="low_latency").validate(), "rank_rows", name="layout")


@pytest.mark.parametrize("value", [1, 0, None, "yes"])
def test_ep_spec_zero_copy_combine_bool(value):
    _spec_invalid("zero_copy_combine", "bool", layout="rank_rows", zero_copy_combine=value)


def test_ep_layer_zero_copy_combine(monkeypatch):
    """EpLayer(zero_copy_combine=...) (keyword only) is checked before init(group)
    (collective); a valid config reaches it."""
    ep = layer_stops_at_init(monkeypatch)
    group = object()
    assert isinstance(ep.EpLayer.zero_copy_combine, property)
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, zero_copy_combine=True), "zero_copy_combine", "rank_rows")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, layout="rank_rows", zero_copy_combine="yes"),
                   "zero_copy_combine", "bool")
    for kw in (dict(), dict(own_rows_first=True), dict(dtype=FP8, num_sms=4, expert_alignment=16)):
        with pytest.raises(ReachedInit):
            ep.EpLayer(group, 8, 256, 2, 8, layout="rank_rows", zero_copy_combine=True, **kw)
    with pytest.raises(TypeError):
        ep.EpLayer(group, 8, 256, 2, 8, torch.bfloat16, torch.float32, 0, "high_throughput", 1, 0, "rank_rows", False,
                   True)


def test_ep_layer_combine_input_needs_the_option():
    """combine_input() of a layer built without zero_copy_combine raises
    ferry.InvalidArgument naming the option before touching the buffer; of a
    finalized layer, ferry.Error (a layer made without a group: no GPU needed)."""
    import ferry._ep as ep

    layer = ep.EpLayer.__new__(ep.EpLayer)
    layer.spec = _spec(layout="rank_rows").validate()
    layer._buffer = object()  # never reached
    expect_invalid(layer.combine_input, "zero_copy_combine", "EpLayer.combine_input")
    layer._buffer = None
    expect_error(ferry.Error, layer.combine_input, "finalized")


def test_check_combine_args_zero_copy_rows():
    """The standalone combine checks (no layer) know combine_input()'s rows: at most world * max_tokens (or
    max_recv_rows); more raise ferry.InvalidArgument naming combine_input(). (Only a layer knows its address.)"""
    from ferry._ep import check_combine_args

    spec = _spec(layout="rank_rows", zero_copy_combine=True).validate()  # max_tokens 8, world 2: 16 rows
    out = torch.zeros(8, 256, dtype=BF16)
    check_combine_args(spec, torch.zeros(16, 256, dtype=BF16), 8, 16, out)
    expect_invalid(lambda: check_combine_args(spec, torch.zeros(17, 256, dtype=BF16), 8, -1, out),
                   "expert_output", "combine_input()", "16")
    capped = _spec(layout="rank_rows", zero_copy_combine=True, max_recv_rows=12).validate()
    expect_invalid(lambda: check_combine_args(capped, torch.zeros(13, 256, dtype=BF16), 8, -1, out),
                   "combine_input()", "12")
    # Without the option any number of rows at or above the dispatch's passes.
    check_combine_args(_spec(layout="rank_rows").validate(), torch.zeros(17, 256, dtype=BF16), 8, 16, out)

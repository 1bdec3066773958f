"""EpConfig::own_rows_first from Python, no GPU needed: the option reaches the C++
config, and the C++ rules (rank_rows only; max_recv_rows 0 or at least
max_tokens) reject what EpBuffer would, before any collective step
(NOTE [EP own rows first] in src/ep/destination_rows.cuh)."""
import pytest
import torch

import ferry
from _helpers import (ReachedInit, ep_spec as _spec, ep_spec_invalid as _spec_invalid, expect_error, expect_invalid,
                      layer_stops_at_init)

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn


def test_ep_spec_own_rows_first_valid():
    """own_rows_first (rank_rows only) reaches the C++ config; off by default;
    max_recv_rows 0 or >= max_tokens (8 here) with it."""
    assert _spec().config().own_rows_first is False
    assert _spec(layout="rank_rows").validate().config().own_rows_first is False
    for dtype in (BF16, FP8):
        for world, experts in ((1, 1), (2, 8), (8, 256)):
            spec = _spec(layout="rank_rows", own_rows_first=True, dtype=dtype, world_size=world, num_experts=experts,
                         topk=1).validate()
            assert spec.own_rows_first is True and spec.config().own_rows_first is True
            assert spec.config().layout == ferry._C.EpLayout.rank_rows
    for rows in (0, 8, 9, 100):
        _spec(layout="rank_rows", own_rows_first=True, max_recv_rows=rows).validate()
    _spec(layout="rank_rows", max_recv_rows=7).validate()  # without own_rows_first: any row count
    # The sizes are those of rank rows either way.
    assert (_spec(layout="rank_rows", own_rows_first=True).dims().capacity_rows
            == _spec(layout="rank_rows").dims().capacity_rows)
    config = ferry._C.EpConfig()
    config.own_rows_first = True
    assert config.own_rows_first is True


def test_ep_spec_own_rows_first_needs_rank_rows():
    """own_rows_first orders rank rows: with the expanded layout (either mode)
    the C++ config check raises ferry.InvalidArgument naming it."""
    for mode in ("high_throughput", "low_latency"):
        for dtype in (BF16, FP8):
            _spec_invalid("own_rows_first", "rank_rows", "expanded", layout="expanded", own_rows_first=True, mode=mode,
                          dtype=dtype)
    # The same rule as EpBuffer's own (the compiled module's config check).
    config = _spec().config()
    config.own_rows_first = True
    expect_invalid(lambda: ferry._C.validate_ep_config(config, 2), "own_rows_first", "expanded")
    # rank_rows with low_latency stays ferry.NotSupported (the mode is the problem there).
    expect_error(ferry.NotSupported, lambda: _spec(layout="rank_rows", own_rows_first=True,
                                                   mode="low_latency").validate(), "rank_rows", name="layout")


@pytest.mark.parametrize("rows", [1, 7])
def test_ep_spec_own_rows_first_max_recv_rows(rows):
    """Every call's own tokens are rows: max_recv_rows below max_tokens (8) is refused."""
    _spec_invalid("max_recv_rows", "own_rows_first", str(rows), "8", layout="rank_rows", own_rows_first=True,
                  max_recv_rows=rows)


@pytest.mark.parametrize("value", [1, 0, None, "yes"])
def test_ep_spec_own_rows_first_bool(value):
    _spec_invalid("own_rows_first", "bool", layout="rank_rows", own_rows_first=value)


def test_ep_layer_own_rows_first(monkeypatch):
    """EpLayer(own_rows_first=...) is checked before init(group) (collective);
    a valid config reaches it."""
    ep = layer_stops_at_init(monkeypatch)
    group = object()
    assert isinstance(ep.EpLayer.own_rows_first, property)
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, own_rows_first=True), "own_rows_first", "rank_rows")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, layout="expanded", own_rows_first=True),
                   "own_rows_first")
    expect_invalid(lambda: ep.EpLayer(group, 8, 256, 2, 8, layout="rank_rows", own_rows_first=True, max_recv_rows=7),
                   "max_recv_rows", "own_rows_first")
    for kw in (dict(), dict(max_recv_rows=8), dict(dtype=FP8, num_sms=4, expert_alignment=16)):
        with pytest.raises(ReachedInit):
            ep.EpLayer(group, 8, 256, 2, 8, layout="rank_rows", own_rows_first=True, **kw)
    with pytest.raises(TypeError):
        ep.EpLayer(group, 8, 256, 2, 8, torch.bfloat16, torch.float32, 0, "high_throughput", 1, 0, "rank_rows", True)

"""A fill's price is the reference moved by whole ticks of slippage and nothing else, so its
cost is slippage plus commission, never negative, and without costs a fill is at the reference
exactly, on the tick grid or off it."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.env.fills import Book, CostModel, execute

F64 = torch.float64


@settings(max_examples=300, deadline=None)
@given(
    ref=st.floats(0.5, 20_000.0),
    pos=st.integers(-5, 5),
    qty=st.integers(-5, 5),
    tick=st.sampled_from([0.25, 0.01, 0.00005, 1 / 32]),
    point_value=st.sampled_from([50.0, 1_000.0, 125_000.0]),
    slippage=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    commission=st.sampled_from([0.0, 1.25, 2.5]),
)
def test_costs_are_slippage_plus_commission_and_never_negative(ref, pos, qty, tick, point_value,
                                                                slippage, commission):
    cost = CostModel(tick, point_value, commission, slippage)
    ref_t = torch.tensor([ref], dtype=F64)  # anywhere: on the grid or off it
    book = Book(torch.tensor([float(pos)], dtype=F64), torch.tensor([ref], dtype=F64),
                torch.zeros(1, dtype=F64))
    fill = execute(book, torch.tensor([float(qty)], dtype=F64), ref_t, cost)
    expected = abs(qty) * (cost.slippage_whole_ticks * tick * point_value + commission)
    assert fill.cost.item() >= 0
    assert abs(fill.cost.item() - expected) <= 1e-9 * max(1.0, ref * point_value * abs(qty))
    if qty:
        side = 1 if qty > 0 else -1
        assert fill.price.item() == ref + side * cost.slippage_whole_ticks * tick


@settings(max_examples=200, deadline=None)
@given(ref=st.floats(0.5, 20_000.0), qty=st.integers(-5, 5))
def test_without_costs_an_off_grid_reference_fills_exactly_there(ref, qty):
    cost = CostModel(0.00005, 125_000.0, 0.0, 0.0)
    zero = torch.zeros(1, dtype=F64)
    fill = execute(Book(zero, zero, zero), torch.tensor([float(qty)], dtype=F64),
                   torch.tensor([ref], dtype=F64), cost)
    assert fill.cost.item() == 0.0
    if qty:
        assert fill.price.item() == ref
        assert fill.book.cash.item() == -qty * ref * 125_000.0

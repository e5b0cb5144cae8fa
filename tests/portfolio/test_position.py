"""Positions and the account: exact money, FIFO realised PnL, equity at the last prices."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.errors import UnknownSymbolError
from foxhunt.orders import Contract, OrderFilled, Side, TradingError
from foxhunt.portfolio import Account, AccountOpened, Position, PriceMarked

ES = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
CL = Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50"))
FX = Contract("FDAX", Decimal("0.5"), Decimal(25), Decimal(2), currency="EUR")


def fill(symbol: str, signed: int, price: int, n: int = 0, commission: str = "2.25") -> OrderFilled:
    return OrderFilled(
        ts_ns=n, client_order_id=f"o{n}", fill_id=f"f{n}", symbol=symbol, side=Side.of(signed),
        quantity=abs(signed), price_ticks=price, commission=Decimal(commission) * abs(signed),
    )  # fmt: skip


def opened(cash: str = "100000") -> AccountOpened:
    return AccountOpened(ts_ns=0, account="acc", currency="USD", starting_cash=Decimal(cash))


def test_fifo_realises_the_oldest_lot_first_in_whole_ticks():
    pos = Position("ES")
    pos.fill(2, 100)
    pos.fill(1, 104)
    assert pos.avg_price_ticks == Fraction(304, 3)
    assert pos.fill(-2, 110) == 2 * 10  # the two contracts bought at 100
    assert pos.quantity == 1 and pos.unrealised_ticks(110) == 6


def test_a_fill_through_zero_closes_the_position_and_opens_the_rest():
    pos = Position("ES")
    pos.fill(2, 100)
    assert pos.fill(-5, 98) == -4
    assert pos.quantity == -3 and list(pos.lots) == [[-3, 98]]
    assert pos.unrealised_ticks(96) == 6  # short 3 from 98, now 96


def test_account_equity_is_balance_plus_open_pnl_at_the_marks():
    acc = Account({"ES": ES})
    acc.apply(opened())
    acc.apply(fill("ES", 2, 18000, 1))
    acc.apply(PriceMarked(ts_ns=2, symbol="ES", price_ticks=18004))
    assert acc.unrealised() == Decimal(2 * 4 * 12.5)
    assert acc.balance == Decimal(100000) - Decimal("4.50")
    assert acc.equity() == Decimal("100095.50")
    acc.apply(fill("ES", -2, 18008, 3))
    assert acc.realised == Decimal(200) and acc.unrealised() == 0  # 8 ticks x 2 x $12.50
    assert acc.gross_exposure() == 0


def test_a_fill_marks_its_instrument_at_the_fill_price():
    acc = Account({"ES": ES})
    acc.apply(opened())
    acc.apply(fill("ES", -1, 18000))
    assert acc.marks["ES"] == 18000 and acc.equity() == Decimal("99997.75")
    assert acc.gross_exposure() == Decimal(225000)  # one ES at 4500 x $50


def test_unknown_symbols_and_foreign_currencies_are_refused_before_anything_changes():
    acc = Account({"ES": ES, "FDAX": FX})
    acc.apply(opened())
    with pytest.raises(UnknownSymbolError, match="no contract spec for 'NQ'"):
        acc.apply(fill("NQ", 1, 100))
    with pytest.raises(TradingError, match="FDAX trades in EUR, the account 'acc' is in USD"):
        acc.apply(fill("FDAX", 1, 100))
    assert acc.positions == {} and acc.commissions == 0
    with pytest.raises(TradingError, match="already open"):
        acc.apply(opened())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5).filter(bool), st.integers(9000, 9100)), max_size=40),
       st.integers(9000, 9100))  # fmt: skip
def test_equity_equals_the_cash_flows_of_the_fill_model_to_the_cent(fills, mark):
    """env/fills.py keeps cash as notional flows; the account keeps realised PnL. Same equity."""
    acc = Account({"CL": CL})
    acc.apply(opened("50000"))
    flows = Decimal(50000)
    for n, (qty, price) in enumerate(fills):
        acc.apply(fill("CL", qty, price, n, commission="2.50"))
        flows -= qty * price * CL.tick_value + Decimal("2.50") * abs(qty)
    acc.apply(PriceMarked(ts_ns=99, symbol="CL", price_ticks=mark))
    pos = acc.position("CL")
    assert acc.equity() == flows + pos * mark * CL.tick_value
    assert pos == sum(q for q, _ in fills)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-4, 4).filter(bool), st.integers(17900, 18100)),
                min_size=1, max_size=30), st.integers(17900, 18100))  # fmt: skip
def test_the_account_books_what_the_env_fill_model_books(fills, mark):
    """Fed the same fills, env/fills.py's `execute` (float64 tensors, average cost) and the
    account (ticks, Decimal, FIFO) hold the same position and the same equity to the cent."""
    import torch

    from foxhunt.env.fills import Book, CostModel, execute

    cost = CostModel(0.25, 50.0, 2.25, slippage_ticks=0.0)
    zero = torch.zeros((), dtype=torch.float64)
    book = Book(zero, zero, zero + 100_000.0)
    acc = Account({"ES": ES})
    acc.apply(opened())
    for n, (qty, ticks) in enumerate(fills):
        book = execute(book, torch.tensor(float(qty), dtype=torch.float64),
                       torch.tensor(ticks * 0.25, dtype=torch.float64), cost).book  # fmt: skip
        acc.apply(fill("ES", qty, ticks, n))
    acc.apply(PriceMarked(ts_ns=99, symbol="ES", price_ticks=mark))
    env_equity = float(book.cash) + float(book.position) * mark * 0.25 * 50.0
    assert acc.position("ES") == int(book.position)
    assert abs(float(acc.equity()) - env_equity) < 0.005


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5).filter(bool), st.integers(90, 110)), max_size=40),
       st.integers(90, 110))  # fmt: skip
def test_the_kept_lot_cost_is_the_lots_sum_after_any_fills(fills, mark):
    """Every mark reads unrealised PnL as quantity x mark - cost; the cost kept through fills is
    the open lots' sum, so that equals the sum over the lots."""
    pos = Position("ES")
    for n, (qty, price) in enumerate(fills):
        pos.fill(qty, price, n)
        assert pos.cost_ticks == sum(q * p for q, p in pos.lots)
    assert pos.unrealised_ticks(mark) == sum(q * (mark - p) for q, p in pos.lots)

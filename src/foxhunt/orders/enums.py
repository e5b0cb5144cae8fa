"""Order vocabulary: side, type, time in force."""

from __future__ import annotations

from enum import StrEnum


class Side(StrEnum):
    BUY = "BUY"
    SELL = "SELL"

    @property
    def sign(self) -> int:
        return 1 if self is Side.BUY else -1

    @property
    def opposite(self) -> Side:
        return Side.SELL if self is Side.BUY else Side.BUY

    @classmethod
    def of(cls, signed_qty: int) -> Side:
        if signed_qty == 0:
            raise ValueError("a zero quantity has no side")
        return cls.BUY if signed_qty > 0 else cls.SELL


class OrderType(StrEnum):
    MARKET = "MARKET"  # fills at the next available price
    LIMIT = "LIMIT"  # fills at the limit price or better
    STOP = "STOP"  # a market order once the stop price trades


class TimeInForce(StrEnum):
    GTC = "GTC"  # good till canceled
    DAY = "DAY"  # expires at the session close
    IOC = "IOC"  # fills what it can at once, the rest is canceled
    ATC = "ATC"  # at the close: a market order filled at the close of the bar it meets

"""When a contract month stops trading, as a rule per root (`[ROOT] expiry` in instruments.toml).

An import that carries the exchange's instrument definitions (an `expiration` column) uses
those dates; the rule is what fills in when a file has none. It is stated in the exchange's
terms (docs/futures.md#expiry-rules):

    anchor = "nth_weekday"        the `n`th `weekday` of the month  (ES: 3rd Friday)
    anchor = "day"                calendar day `day` of the month   (CL: the 25th ...)
    anchor = "last_business_day"  the month's last Monday-Friday    (GC, ZN)

in the contract month, or `month = -1` months before it (CL: the month before delivery), then
moved back `business_days_before` Monday-to-Friday days (CL: 3, GC: 2, ZN: 7, 6E: 2). A `day`
anchor that falls on a weekend is first moved back to the Friday before, which is how CME words
CL's "if the 25th is not a business day". Business days here are Monday to Friday: the rule
knows no exchange holidays (Good Friday 2008 moved ES's March expiry to the Thursday), which
is why the definitions win where an import has them.
"""

from __future__ import annotations

import calendar
from datetime import date, timedelta
from typing import Literal

from pydantic import model_validator

from foxhunt.configbase import StrictConfig

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri")


class ExpiryRule(StrictConfig):
    """The last trading day of a contract month, from its year and month (see the module)."""

    anchor: Literal["nth_weekday", "day", "last_business_day"]
    weekday: Literal["mon", "tue", "wed", "thu", "fri"] = "fri"
    n: int = 3
    day: int = 1
    month: Literal[0, -1] = 0
    business_days_before: int = 0

    @model_validator(mode="after")
    def _in_range(self) -> ExpiryRule:
        if not 1 <= self.n <= 4:
            raise ValueError(f"n must be 1..4 (the nth weekday of a month), got {self.n}")
        if not 1 <= self.day <= 28:
            raise ValueError(f"day must be 1..28 (a day every month has), got {self.day}")
        if not 0 <= self.business_days_before <= 20:
            raise ValueError(f"business_days_before must be 0..20, got {self.business_days_before}")
        return self

    def expiry(self, year: int, month: int) -> date:
        """The last trading day of the contract month `month` (1-12) of `year`."""
        y, m = (year, month) if self.month == 0 else ((year - 1, 12) if month == 1
                                                     else (year, month - 1))
        if self.anchor == "nth_weekday":
            first = date(y, m, 1)
            offset = (WEEKDAYS.index(self.weekday) - first.weekday()) % 7
            anchor = first + timedelta(days=offset + 7 * (self.n - 1))
        elif self.anchor == "day":
            anchor = _business_on_or_before(date(y, m, self.day))
        else:
            anchor = _business_on_or_before(date(y, m, calendar.monthrange(y, m)[1]))
        for _ in range(self.business_days_before):
            anchor = _business_on_or_before(anchor - timedelta(days=1))
        return anchor

    def describe(self) -> str:
        """The rule in words, for listings and errors (`3rd Friday of the contract month`)."""
        where = "the contract month" if self.month == 0 else "the month before the contract month"
        if self.anchor == "nth_weekday":
            nth = {1: "1st", 2: "2nd", 3: "3rd", 4: "4th"}[self.n]
            names = dict(zip(WEEKDAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
                             strict=True))
            text = f"{nth} {names[self.weekday]} of {where}"
        elif self.anchor == "day":
            text = f"day {self.day} of {where} (the Friday before on a weekend)"
        else:
            text = f"last business day of {where}"
        if self.business_days_before:
            text = f"{self.business_days_before} business days before the {text}"
        return text


def _business_on_or_before(d: date) -> date:
    while d.weekday() >= 5:
        d -= timedelta(days=1)
    return d

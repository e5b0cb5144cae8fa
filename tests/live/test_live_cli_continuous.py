"""`foxhunt live` on a stored continuous series is refused in one line: live trades one
symbol's own prices and does not roll yet, so it would trade the stitched prices and hold a
position past its month's expiry. The line names the front month to trade instead, and that
month's own symbol is taken (by its root's spec, as paper holds months). The refusal as a bad
input (one line, exit 1, no file changed) is also a case of tests/cli/test_bad_input.py."""

from __future__ import annotations

from datetime import date

import pytest

from ..cli.bad_input_cases import cli, continuous_es

SMA = ("--strategy", "sma:10,30")
IB = ("--venue", "ib:127.0.0.1:7497")  # refused at once for want of --ib-contracts


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """ES's synthetic months (expiring 2024-03-15 .. 2024-12-20) and ES 1d stitched from them."""
    root = tmp_path_factory.mktemp("live_continuous")
    home, inputs = root / "home", root / "in"
    inputs.mkdir()
    continuous_es(home, inputs)
    return home


def refused(home, *argv: str) -> str:
    code, out, err = cli(home, *argv)
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (
        code, out, err)
    assert not (home / "trading").exists() or not any((home / "trading").iterdir())
    return err.strip()


def test_live_on_a_continuous_series_is_refused_naming_the_front_month(home, monkeypatch):
    monkeypatch.setattr("foxhunt.cli.evaluate._today", lambda: date(2024, 7, 1))
    assert refused(home, "live", "ES", "--bars", "1d", *SMA, *IB) == (
        "error: ES 1d is a continuous series, and foxhunt live does not roll a position yet "
        "(it would trade the stitched prices and never roll): trade the front month's own "
        "symbol instead (foxhunt live ESU24, the front month stored)")


def test_when_every_stored_month_has_expired_the_line_says_to_import_the_front_month(home):
    assert refused(home, "live", "ES", "--bars", "1d", *SMA, *IB) == (  # today: 2026 or later
        "error: ES 1d is a continuous series, and foxhunt live does not roll a position yet "
        "(it would trade the stitched prices and never roll): trade the front month's own "
        "symbol instead (the stored months end with ESZ24, expired: import the front month's "
        "bars (foxhunt data import FILE --symbol ES) and trade it)")


def test_the_front_months_own_symbol_is_taken(home):
    # past the symbol and the continuous checks: the next check is the IB venue's own
    err = refused(home, "live", "ESU24", "--bars", "1d", *SMA, *IB)
    assert err.startswith("error: --venue ib:...: give --ib-contracts FILE"), err
    assert refused(home, "live", "ESX24", "--bars", "1d", *SMA, *IB) == (
        "error: ESX24: no such contract month stored; import it (foxhunt data import ESX24.csv "
        "--symbol ...) or give a stored month's symbol")


def test_the_local_exchange_refuses_a_continuous_series_the_same_way(home, monkeypatch):
    """`foxhunt venue ES` would play stitched prices that no month ever traded at."""
    monkeypatch.setattr("foxhunt.cli.evaluate._today", lambda: date(2024, 7, 1))
    assert refused(home, "venue", "ES", "--bars", "1d", "--port", "1") == (
        "error: ES 1d is a continuous series, and foxhunt venue does not roll a position yet "
        "(it would trade the stitched prices and never roll): trade the front month's own "
        "symbol instead (foxhunt venue ESU24, the front month stored)")

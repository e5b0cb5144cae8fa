"""The risk config: frozen, unknown keys refused, read from the [risk] table of a TOML file."""

from __future__ import annotations

from decimal import Decimal

import pytest

from foxhunt.errors import ConfigError
from foxhunt.orders import Contract, OrderBook
from foxhunt.portfolio import Account
from foxhunt.risk import RiskConfig, RiskEngine, load_risk_config


def test_defaults_are_conservative_and_documented():
    cfg = RiskConfig()
    assert (cfg.max_order_qty, cfg.max_position, cfg.max_order_rate) == (5, 5, 10)
    assert cfg.daily_loss_limit == Decimal(5000) and cfg.price_collar_pct == Decimal(5)
    assert cfg.max_var_historical == 0  # off until a window and a limit are given
    with pytest.raises(Exception, match="frozen"):
        cfg.max_position = 9


def test_a_toml_file_with_overrides_loads_exactly(tmp_path):
    path = tmp_path / "risk.toml"
    path.write_text(
        "[risk]\nmax_position = 3\ndaily_loss_limit = 2500.5\n"
        "[risk.instruments.ES]\nmax_order_qty = 1\n"
    )
    cfg = load_risk_config(path)
    assert cfg.max_position == 3 and cfg.daily_loss_limit == Decimal("2500.5")
    assert cfg.instruments["ES"].max_order_qty == 1


def test_mistakes_in_the_file_are_one_line_naming_the_key(tmp_path):
    path = tmp_path / "risk.toml"
    path.write_text("[risk]\nmax_postion = 3\n")
    with pytest.raises(ConfigError, match=r"risk.toml \[risk\]: unknown key 'max_postion'"):
        load_risk_config(path)
    path.write_text("[risk]\nday_close = '25:00'\n")
    with pytest.raises(ConfigError, match="key 'day_close': .*expected HH:MM"):
        load_risk_config(path)
    path.write_text("max_position = 3\n")
    with pytest.raises(ConfigError, match=r"no \[risk\] table"):
        load_risk_config(path)


def test_limits_for_an_instrument_the_account_does_not_know_are_refused():
    es = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
    cfg = RiskConfig(instruments={"NQ": {"max_position": 1}})
    with pytest.raises(ConfigError, match=r"\[risk.instruments\] names unknown instrument\(s\) NQ"):
        RiskEngine(cfg, Account({"ES": es}), OrderBook())

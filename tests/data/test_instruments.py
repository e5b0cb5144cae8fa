"""Instrument specs: shipped for the majors, extendable by the user, strict about unknowns."""

from __future__ import annotations

import pytest

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.errors import ConfigError, UnknownSymbolError


def test_ships_the_majors_with_their_contract_terms():
    reg = InstrumentRegistry.load()
    assert {"ES", "MES", "NQ", "CL", "GC", "6E", "ZN"} <= set(reg.symbols)
    es = reg.get("ES")
    assert (es.tick_size, es.point_value, es.tick_value) == (0.25, 50.0, 12.5)
    assert es.session.tz == "America/Chicago" and es.session.open == "17:00"
    assert reg.get("ZN").tick_size == 1 / 64
    assert reg.get("CL").tick_value == pytest.approx(10.0)


def test_prices_round_to_tick():
    es = InstrumentRegistry.load().get("ES")
    assert es.round_price(4000.12) == 4000.0
    assert es.round_price(4000.13) == 4000.25
    assert es.round_price(4000.38) == 4000.5


def test_unknown_symbol_lists_known_ones():
    with pytest.raises(UnknownSymbolError, match=r"unknown symbol 'XX'; known: .*ES.*ZN"):
        InstrumentRegistry.load().get("XX")


def test_user_file_adds_and_overrides(tmp_path):
    f = tmp_path / "instruments.toml"
    f.write_text('[FDAX]\ntick_size = 0.5\npoint_value = 25.0\ncommission = 1.5\ncurrency = "EUR"\n'
                 'session = { tz = "Europe/Berlin", open = "01:00", close = "22:00" }\n'
                 "[ES]\ntick_size = 0.25\npoint_value = 50.0\ncommission = 0.5\n")
    reg = InstrumentRegistry.load(f)
    assert reg.get("FDAX").currency == "EUR"
    assert reg.get("ES").commission == 0.5


@pytest.mark.parametrize(
    "body, match",
    [
        ("[X]\ntick_size = 0\npoint_value = 1\ncommission = 0\n", r"\[X\]: key 'tick_size'"),
        ("[X]\ntick_size = 1\npoint_value = 1\ncommission = 0\ncolour = 1\n", r"unknown key 'colour'"),
        ("[X]\ntick_size = 1\npoint_value = 1\n", r"missing key 'commission'"),
        ('[X]\ntick_size = 1\npoint_value = 1\ncommission = 0\nsession = { tz = "Mars/Base" }\n', "unknown time zone"),
        ('[X]\ntick_size = 1\npoint_value = 1\ncommission = 0\nsession = { open = "25:00" }\n', "HH:MM"),
    ],
)
def test_bad_instrument_files_name_the_symbol_and_key(tmp_path, body, match):
    f = tmp_path / "instruments.toml"
    f.write_text(body)
    with pytest.raises(ConfigError, match=match):
        InstrumentRegistry.load(f)

"""The PostgreSQL server fixtures (tests/pg.py), `db_url`: foxhunt's database on each
backend, a SQLite file and a fresh PostgreSQL database, and `market`: what a job runs on."""

import pytest

from ..cli.test_cli import run_json
from ..cli.test_cli_train_backtest import TINY
from ..pg import postgres  # noqa: F401  (fixture)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'foxhunt.db'}"
    return request.getfixturevalue("postgres").create_database()


@pytest.fixture
def market(capsys, isolated_home, monkeypatch):
    """Tiny training settings as FOXHUNT_HOME's config (the children read it) and a synthetic
    market in its store. Children run on one thread each, like this process (conftest.py): on
    two cores shared with the other test process, torch's own threads spin against each other
    and a tiny training run takes six times as long."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (isolated_home / "config.toml").write_text(TINY)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "1500", "--seed", "4",
             "--signal-strength", "0.3")
    return isolated_home

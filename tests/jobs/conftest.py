"""The PostgreSQL server fixtures (tests/pg.py), and `db_url`: foxhunt's database on each
backend, a SQLite file and a fresh PostgreSQL database."""

import pytest

from ..pg import postgres  # noqa: F401  (fixture)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'foxhunt.db'}"
    return request.getfixturevalue("postgres").create_database()

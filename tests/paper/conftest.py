"""The PostgreSQL server fixtures (tests/pg.py): `postgres` and `log_url` (SQLite and PostgreSQL)."""

from ..pg import log_url, postgres  # noqa: F401  (fixtures)

"""The PostgreSQL server fixtures (tests/pg.py): a study's storage is tested on SQLite and on a
real PostgreSQL server."""

from ..pg import log_url, postgres  # noqa: F401  (fixtures)

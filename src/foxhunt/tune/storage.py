"""Where a study lives: an Optuna RDB storage (SQLite in FOXHUNT_HOME by default, or any
SQLAlchemy URL such as PostgreSQL), readable by optuna-dashboard as it is."""

from __future__ import annotations

import re
from pathlib import Path

SQLITE_TIMEOUT_S = 60
"""How long a writer waits for SQLite's lock: trials in K processes report every epoch."""


def default_storage_url(home: Path) -> str:
    path = Path(home) / "studies" / "studies.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def open_storage(url: str):
    """An Optuna RDBStorage for `url`; SQLite waits for its lock rather than failing."""
    import optuna

    kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except ImportError as exc:
        from foxhunt.errors import ConfigError

        raise ConfigError(f"storage {safe_url(url)}: its database driver is not installed "
                          f"({exc.name}); e.g. pip install psycopg2-binary for PostgreSQL") from None


def safe_url(url: str) -> str:
    """`url` with any password replaced by ***, for messages and study.json."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)

"""`foxhunt serve`'s settings: where it listens, which database holds its users and jobs, and how
long a token lives."""

from __future__ import annotations

from pydantic import Field

from foxhunt.configbase import StrictConfig
from foxhunt.server.auth import Argon2Settings


class ServerConfig(StrictConfig):
    host: str = Field("127.0.0.1", description="address to bind; loopback unless told otherwise")
    port: int = Field(8765, ge=0, le=65535)
    database: str | None = Field(None, description="SQLAlchemy URL of users, keys, audit and "
                                 "jobs (default: sqlite FOXHUNT_HOME/foxhunt.db)")
    token_ttl_s: int = Field(900, ge=30, le=86_400, description="a token's life")
    cors_origins: tuple[str, ...] = Field((), description="origins allowed cross-site (none)")
    login_failures: int = Field(5, ge=1, description="failed sign-ins before a pause")
    login_window_s: float = Field(60.0, gt=0, description="the pause and the counting window")
    stream_poll_s: float = Field(0.02, gt=0, le=5, description="how often a stream looks for "
                                 "events other processes wrote")
    recheck_s: float = Field(2.0, ge=0, le=300, description="how long a caller's role is taken "
                             "as read: a removed user or a revoked key stops within this time")
    argon2: Argon2Settings = Argon2Settings()

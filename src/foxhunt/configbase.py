"""Base for every config model: frozen, unknown keys rejected, errors rendered as one line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict

from foxhunt.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class StrictConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


def _known_zone(v: str) -> str:
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {v!r}") from None
    return v


def _hhmm(v: str) -> str:
    if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", v):
        raise ValueError(f"expected HH:MM, got {v!r}")
    return v


TimeZoneName = Annotated[str, AfterValidator(_known_zone)]
"""An IANA time zone name (`America/Chicago`)."""
ClockTime = Annotated[str, AfterValidator(_hhmm)]
"""A time of day as HH:MM, 24-hour."""


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def describe_validation_error(exc: pydantic.ValidationError, source: str) -> str:
    """First problem of a pydantic error as `source: key.path: message`."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "(top level)"
    if err["type"] == "extra_forbidden":
        return f"{source}: unknown key '{key}'"
    if err["type"] == "missing":
        return f"{source}: missing key '{key}'"
    if not err["loc"]:
        return f"{source}: {err['msg']}"
    return f"{source}: key '{key}': {err['msg']} (got {err.get('input')!r})"


def validate_config(model: type[M], data: dict[str, Any], source: str) -> M:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source)) from None

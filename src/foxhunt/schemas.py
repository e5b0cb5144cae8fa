"""The `--json` documents: their kinds, schema versions and JSON Schemas (docs/json.md).

Every `foxhunt ... --json` prints one JSON object led by `schema_version` and `kind`; the
schema of a kind is `resources/schemas/KIND.schema.json` (draft 2020-12). A kind's version
stays while its documents only grow (new keys); removing, renaming or retyping a key bumps it,
here and in the schema's `schema_version` const together."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

SCHEMA_VERSIONS: dict[str, int] = {
    "version": 1,
    "config": 1,
    "data.import": 1,
    "data.list": 1,
    "data.sample": 1,
    "data.show": 1,
    "data.export": 1,
    "data.synth": 1,
    "data.continuous": 1,
    "data.rolls": 1,
    "features.show": 1,
    "features.export": 1,
    "backtest": 1,
    "report.run": 1,
    "report.study": 1,
    "train.run": 1,
    "demo": 1,
    "tune.study": 1,
    "paper": 1,
    "live": 1,
    "venue.event": 1,
    "orders": 1,
    "positions": 1,
    "risk": 1,
    "users": 1,
    "keys": 1,
    "key": 1,
    "job": 1,
    "jobs": 1,
}
"""Each document kind and its current schema version."""

ENVELOPE = ("schema_version", "kind")


def kinds() -> list[str]:
    return list(SCHEMA_VERSIONS)


def envelope(kind: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """`doc` led by its `schema_version` and `kind`. A document is an object of a known kind
    whose own keys leave those two alone: anything else is a bug in the command."""
    if kind not in SCHEMA_VERSIONS:
        raise ValueError(f"unknown JSON document kind {kind!r}: add it to foxhunt.schemas "
                         "with a schema and docs/json.md")
    if not isinstance(doc, Mapping):
        raise TypeError(f"a --json document is an object, not a {type(doc).__name__} ({kind})")
    clash = [k for k in ENVELOPE if k in doc]
    if clash:
        raise ValueError(f"{kind}: the document's own keys may not be {', '.join(clash)}")
    return {"schema_version": SCHEMA_VERSIONS[kind], "kind": kind, **doc}


def load_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a document kind."""
    if kind not in SCHEMA_VERSIONS:
        raise ValueError(f"unknown JSON document kind {kind!r}; the kinds: {', '.join(kinds())}")
    path = resources.files("foxhunt.resources").joinpath("schemas", f"{kind}.schema.json")
    return json.loads(path.read_text(encoding="utf-8"))


def validate(doc: Mapping[str, Any]) -> None:
    """Check a document against the schema its `kind` names (needs the `jsonschema` package);
    raises `jsonschema.ValidationError` where it does not hold."""
    import jsonschema

    kind = doc.get("kind")
    if not isinstance(kind, str):
        raise TypeError("not a foxhunt --json document: no kind")
    jsonschema.Draft202012Validator(load_schema(kind)).validate(doc)


__all__ = ["SCHEMA_VERSIONS", "envelope", "kinds", "load_schema", "validate"]

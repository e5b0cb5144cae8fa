"""Checkpoints: weights + the run's config + a fingerprint of the network layout.

Written atomically (temp file, then rename). Loading into a network whose layout differs fails
with one line naming the first difference, instead of a wall of state-dict key errors.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from foxhunt import __version__
from foxhunt.agents.dqn.layout import describe_layout_diff, layout_description, layout_fingerprint
from foxhunt.errors import CheckpointError

FORMAT = "foxhunt-checkpoint/1"


def save_checkpoint(path: Path, network: nn.Module, spec: dict[str, Any], extra: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "foxhunt": __version__,
        "fingerprint": layout_fingerprint(network),
        "layout": layout_description(network),
        "spec": spec,
        "extra": extra,
        "state_dict": {k: v.detach().cpu() for k, v in network.state_dict().items()},
    }
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def read_checkpoint(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a foxhunt checkpoint (expected format {FORMAT})")
    return payload


def load_checkpoint(path: Path, network: nn.Module) -> dict[str, Any]:
    """Load weights into `network` after checking its layout; returns the payload."""
    payload = read_checkpoint(path)
    if payload["fingerprint"] != layout_fingerprint(network):
        diff = describe_layout_diff(payload["layout"], network) or "layout fingerprints differ"
        raise CheckpointError(f"{path}: checkpoint does not fit this network: {diff}")
    network.load_state_dict(payload["state_dict"])
    return payload

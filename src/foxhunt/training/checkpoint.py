"""Checkpoints: weights + the run's config + a fingerprint of the network layout.

Written atomically (temp file, then rename). Loading into a network whose layout differs fails
with one line naming the first difference, instead of a wall of state-dict key errors.
`load_policy` reads a fold's policy back for the backtest and paper trading; every way a file
can be wrong (missing, foreign, truncated, another layout) is one `CheckpointError` line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import torch
from torch import nn

from foxhunt import __version__
from foxhunt.agents.dqn import BranchingQNetwork
from foxhunt.agents.dqn.layout import describe_layout_diff, layout_description, layout_fingerprint
from foxhunt.configbase import describe_validation_error
from foxhunt.data.instruments import Session
from foxhunt.env.observation import ObservationSpec
from foxhunt.errors import CheckpointError
from foxhunt.features.config import FeatureConfig
from foxhunt.features.normalise import Normaliser
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.training.config import TrainingSpec

FORMAT = "foxhunt-checkpoint/1"
_ZIP = b"PK\x03\x04"  # how every file torch.save writes begins


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
    except Exception as exc:  # noqa: BLE001 - a damaged file can make torch raise anything
        raise CheckpointError(_unreadable(path, exc)) from None
    version = payload.get("format") if isinstance(payload, dict) else None
    if version != FORMAT:
        if isinstance(version, str) and version.startswith("foxhunt-checkpoint/"):
            raise CheckpointError(
                f"{path}: checkpoint layout {version} (foxhunt {payload.get('foxhunt')}); this "
                f"foxhunt reads {FORMAT}: load it with the version that wrote it, or retrain")
        raise CheckpointError(f"{path}: not a foxhunt checkpoint (expected format {FORMAT})")
    return payload


def _unreadable(path: Path, exc: Exception) -> str:
    """Why torch cannot read `path`: a file torch.save wrote, cut or damaged since, or another
    kind of file."""
    with open(path, "rb") as fh:
        if fh.read(len(_ZIP)) == _ZIP:
            return (f"{path}: truncated or damaged checkpoint, not readable "
                    f"({type(exc).__name__}); copy it again from where the run wrote it")
    return f"{path}: not a readable checkpoint: not a file torch.save wrote"


def load_checkpoint(path: Path, network: nn.Module) -> dict[str, Any]:
    """Load weights into `network` after checking its layout; returns the payload."""
    payload = read_checkpoint(path)
    _load_weights(path, payload, network)
    return payload


def _load_weights(path: Path, payload: dict[str, Any], network: nn.Module) -> None:
    if payload["fingerprint"] != layout_fingerprint(network):
        diff = describe_layout_diff(payload["layout"], network) or "layout fingerprints differ"
        raise CheckpointError(f"{path}: checkpoint does not fit this network: {diff}")
    network.load_state_dict(payload["state_dict"])


@dataclass(frozen=True)
class PolicyCheckpoint:
    """A walk-forward fold's policy as its checkpoint (`checkpoints/fold{k}.pt`) holds it."""

    path: Path
    spec: TrainingSpec
    network: BranchingQNetwork  # greedy (eval mode), on the CPU
    observation: ObservationSpec
    feature_config: FeatureConfig  # the run's (the default for checkpoints saved without it)
    metadata: dict[str, Any]  # what the trainer saved beside the weights: fold, normaliser, ...

    def features(self, session: Session,
                 config: FeatureConfig | None = None) -> tuple[FeaturePipeline, Normaliser]:
        """The pipeline that rebuilds the features the policy was trained on (from `config`,
        by default the run's own) and their fitted normaliser."""
        pipeline = FeaturePipeline(config or self.feature_config, session)
        names = list(self.metadata["feature_names"])
        if names != pipeline.names:
            diff = next((f"{a!r} where it builds {b!r}" for a, b in zip(names, pipeline.names)
                         if a != b), f"{len(names)} features where it builds "
                                     f"{pipeline.n_features}")
            raise CheckpointError(f"{self.path}: trained on {diff} with this feature config; "
                                  "pass the features config the run was trained with")
        stats = self.metadata.get("normaliser")
        if stats is None:
            raise CheckpointError(f"{self.path}: no fitted normaliser; a backtest or paper run "
                                  "needs the checkpoint of a walk-forward fold")
        return pipeline, Normaliser(tuple(names), np.asarray(stats["mean"]),
                                    np.asarray(stats["std"]), pipeline.config.clip, 0, 0)


def load_policy(path: Path | str) -> PolicyCheckpoint:
    """A fold's policy, read once: its training spec, greedy network, observation, feature
    config and the trainer's metadata. A checkpoint saved before observations were stored
    gets the one its settings imply (the run's window over its features)."""
    path = Path(path)
    payload = read_checkpoint(path)
    extra = payload["extra"]
    found = f"{FORMAT} checkpoint of foxhunt {payload.get('foxhunt')}"
    try:
        spec = TrainingSpec.model_validate(payload["spec"])
        features = FeatureConfig.model_validate(extra.get("feature_config", {}))
        list(extra["feature_names"])
        doc = extra.get("observation")
        observation = (ObservationSpec(**{**doc, "position": tuple(doc["position"])}) if doc
                       else ObservationSpec.of(spec.env, FeaturePipeline(features)))
    except pydantic.ValidationError as exc:
        why = describe_validation_error(exc, f"its {exc.title}")
        raise CheckpointError(f"{path}: {why} ({found}); retrain, or load it with the foxhunt "
                              "version that wrote it") from None
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: no usable training spec, feature names or observation "
                              f"({type(exc).__name__}: {exc}) in this {found}; load the "
                              "checkpoint of a walk-forward fold") from None
    network = BranchingQNetwork(observation.size, spec.agent, extra.get("feature_groups"),
                                observation.window, observation.pos_dim)
    _load_weights(path, payload, network)
    return PolicyCheckpoint(path, spec, network.eval(), observation, features, extra)

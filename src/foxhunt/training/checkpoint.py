"""Checkpoints: weights + the run's config + a fingerprint of the network layout.

Written atomically (temp file, then rename). Loading into a network whose layout differs fails
with one line naming the first difference, instead of a wall of state-dict key errors; so does
every other way a file can be wrong (missing, foreign, truncated, another layout).
`load_policy` reads a fold's policy back for the backtest and paper trading, as the network of
the learner that trained it: a checkpoint records its network's kind (`[agent] kind`; files
written before kinds existed hold a DQN).
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
from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.layout import describe_layout_diff, layout_description, layout_fingerprint
from foxhunt.agents.ppo import ActorCritic, PPOConfig
from foxhunt.agents.pqn import QNetwork
from foxhunt.configbase import describe_validation_error
from foxhunt.data.instruments import Session
from foxhunt.env.observation import ObservationSpec
from foxhunt.errors import CheckpointError
from foxhunt.features.config import FeatureConfig
from foxhunt.features.normalise import Normaliser
from foxhunt.features.pipeline import FeaturePipeline
from foxhunt.training.config import TrainingSpec

FORMAT = "foxhunt-checkpoint/1"
POLICY_NETWORKS: dict[str, type[nn.Module]] = {"dqn": BranchingQNetwork, "pqn": QNetwork,
                                               "ppo": ActorCritic}
"""The network each learner kind deploys."""


def kind_of(network: nn.Module) -> str | None:
    """The kind whose policy network `network` is; None for any other module."""
    return next((k for k, cls in POLICY_NETWORKS.items() if type(network) is cls), None)


def policy_network(kind: str, agent: AgentConfig, observation: ObservationSpec,
                   feature_groups: dict[str, list[int]] | None,
                   ppo: PPOConfig | None = None) -> nn.Module:
    """A fresh policy network of `kind` for `observation`, to load a checkpoint's weights into
    (`ppo`: the run's [ppo], which says whether PPO's policy is recurrent)."""
    if kind == "ppo":
        return ActorCritic(observation.size, agent, ppo or PPOConfig(), observation.window,
                           observation.pos_dim)
    if kind == "pqn":
        return QNetwork(observation.size, agent, observation.window, observation.pos_dim)
    return BranchingQNetwork(observation.size, agent, feature_groups, observation.window,
                             observation.pos_dim)


def save_checkpoint(path: Path, network: nn.Module, spec: dict[str, Any], extra: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "foxhunt": __version__,
        "kind": kind_of(network),
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
        with open(path, "rb") as fh:
            cut = fh.read(4) == b"PK\x03\x04"  # how every file torch.save writes begins
        raise CheckpointError(f"{path}: " + (
            f"truncated or damaged checkpoint ({type(exc).__name__}); copy it again from where "
            "the run wrote it" if cut else "not a readable checkpoint: no file torch.save wrote")
        ) from None
    version = payload.get("format") if isinstance(payload, dict) else None
    if version != FORMAT:
        if isinstance(version, str) and version.startswith("foxhunt-checkpoint/"):
            raise CheckpointError(
                f"{path}: checkpoint layout {version} (foxhunt {payload.get('foxhunt')}); this "
                f"foxhunt reads {FORMAT}: load it with the version that wrote it, or retrain")
        raise CheckpointError(f"{path}: not a foxhunt checkpoint (expected format {FORMAT})")
    return payload


def load_checkpoint(path: Path, network: nn.Module,
                    payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load weights into `network` after checking its layout; returns the payload (`payload`:
    the file's, read already)."""
    payload = payload or read_checkpoint(path)
    if payload["fingerprint"] != layout_fingerprint(network):
        diff = describe_layout_diff(payload["layout"], network) or "layout fingerprints differ"
        raise CheckpointError(f"{path}: checkpoint does not fit this network: {diff}")
    network.load_state_dict(payload["state_dict"])
    return payload


@dataclass(frozen=True)
class PolicyCheckpoint:
    """A walk-forward fold's policy as its checkpoint (`checkpoints/fold{k}.pt`) holds it."""

    path: Path
    spec: TrainingSpec
    network: nn.Module  # `POLICY_NETWORKS[kind]`, greedy (eval mode), on the CPU
    observation: ObservationSpec
    feature_config: FeatureConfig  # the run's (the default for checkpoints saved without it)
    feature_names: tuple[str, ...]
    metadata: dict[str, Any]  # what the trainer saved beside the weights: fold, normaliser, ...
    kind: str = "dqn"  # the learner that trained it (`[agent] kind`)

    def features(self, session: Session,
                 config: FeatureConfig | None = None) -> tuple[FeaturePipeline, Normaliser]:
        """The pipeline that rebuilds the features the policy was trained on (from `config`,
        by default the run's own) and their fitted normaliser."""
        pipeline = FeaturePipeline(config or self.feature_config, session)
        names, first = self.feature_names, self.observation.valid_from
        if names != tuple(pipeline.names) or first != pipeline.warmup:
            diff = next((f"{a!r} where it builds {b!r}" for a, b in zip(names, pipeline.names)
                         if a != b), f"{len(names)} features from bar {first} where it builds "
                                     f"{pipeline.n_features} from bar {pipeline.warmup}")
            raise CheckpointError(f"{self.path}: trained on {diff} with this feature config; "
                                  "pass the features config the run was trained with")
        stats = self.metadata.get("normaliser")
        if stats is None:
            raise CheckpointError(f"{self.path}: no fitted normaliser; a backtest or paper run "
                                  "needs the checkpoint of a walk-forward fold")
        return pipeline, Normaliser(names, np.asarray(stats["mean"]),
                                    np.asarray(stats["std"]), pipeline.config.clip, 0, 0)


def load_policy(path: Path | str) -> PolicyCheckpoint:
    """A fold's policy, read once: its training spec, greedy network, observation, feature
    config and the trainer's metadata. A checkpoint saved before observations were stored
    gets the one its settings imply (the run's window over its feature names, from the warm-up
    of its feature config)."""
    path = Path(path)
    payload = read_checkpoint(path)
    extra = payload["extra"]
    try:
        spec = TrainingSpec.model_validate(payload["spec"])
        features = FeatureConfig.model_validate(extra.get("feature_config", {}))
        names = tuple(extra["feature_names"])
        doc = extra.get("observation")
        observation = (ObservationSpec(**{**doc, "position": tuple(doc["position"])}) if doc
                       else ObservationSpec(spec.env.window, len(names),
                                            FeaturePipeline(features).warmup))
    except (KeyError, TypeError, pydantic.ValidationError) as exc:
        why = (describe_validation_error(exc, exc.title) if isinstance(exc, pydantic.ValidationError)
               else f"{type(exc).__name__}: {exc}")
        raise CheckpointError(f"{path}: no usable training spec, feature names or observation "
                              f"({why}) in this {FORMAT} checkpoint of foxhunt {payload['foxhunt']};"
                              " load the checkpoint of a walk-forward fold, or this one with the "
                              "foxhunt version that wrote it") from None
    kind = payload.get("kind") or "dqn"
    if kind not in POLICY_NETWORKS:
        raise CheckpointError(f"{path}: a policy of kind {kind!r}, which this foxhunt cannot "
                              f"load (it knows {', '.join(POLICY_NETWORKS)}); load it with the "
                              "foxhunt version that wrote it")
    network = policy_network(kind, spec.agent, observation, extra.get("feature_groups"), spec.ppo)
    load_checkpoint(path, network, payload)
    return PolicyCheckpoint(path, spec, network.eval(), observation, features, names, extra, kind)

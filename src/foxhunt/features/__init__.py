"""Causal feature pipeline: bars -> named feature groups -> normalised float32 matrix."""

from foxhunt.features.config import GROUPS, FeatureConfig
from foxhunt.features.normalise import Normaliser
from foxhunt.features.pipeline import FeatureMatrix, FeaturePipeline, FeatureSpec

__all__ = [
    "GROUPS", "FeatureConfig", "FeatureMatrix", "FeaturePipeline", "FeatureSpec", "Normaliser",
]

"""Whether a fold deploys its agent, and a one-line verdict on what its run showed.

Both read validation and training-window numbers only, never the test window's: the deploy
decision is part of model selection, and the test window judges what it chose. The health
checks (`health_notes`) read the fold's run.jsonl lines, which are training diagnostics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from foxhunt.metrics import deflated_sharpe

NO_EDGE = "no edge: flat"
COLLAPSED_FLAT = 0.99
"""Share of validation bars spent flat from which a policy counts as collapsed to flat."""

Deployed = Literal["agent", "flat"]

DIVERGING_EDGE_MASS = 0.5
"""Share of C51's probability on the support's two end atoms (online or projected target, last
epoch) from which the values count as running off the support: a uniform distribution puts
2 / atoms there (0.18 at 11 atoms, 0.04 at 51), and at half the mass most targets are clamped,
so the distributions no longer say what the returns are."""
DIVERGING_GROWTH = 10.0
"""Factor by which |mean Q| or the loss must have grown from the fold's first epoch with updates
to its last to count as growing without bound: value estimates settle within a few times their
early scale while they learn, and bootstrapping that feeds on itself grows geometrically."""
DIVERGING_EPOCHS = 3
"""Epochs in a row of growth, up to the last, that the growth must also show: one late jump is
noise, a steady climb is the feedback loop of divergence."""
GROWTH_FLOOR = 1.0
"""|mean Q| or loss below which growth is not judged: rewards are volatility-scaled, so a value
of one unit is about one bar's typical move, and ratios between numbers near 0 mean nothing."""
HEALTH_METRICS = ("loss", "q_loss", "mean_q", "target_q", "grad_norm", "td_p99")
"""The run.jsonl update metrics that must stay finite."""
CONCENTRATED = 0.99
"""Share of the collect steps on one action from which a branch counts as deterministic: the
noisy policy's collect steps then try nothing else."""
DEAD_SIGMA_SHARE = 0.1
"""The noisy layers' mean |sigma| at the fold's last epoch, as a share of its first, at or
below which the noise has collapsed: learning shrinks sigma where noise costs, and a tenth of
its start no longer moves a greedy choice that is concentrated everywhere."""


@dataclass(frozen=True)
class Opportunity:
    """The best simple rule on a fold's validation window, chosen and judged there only (e.g.
    `backtest.rule_search.choose_rule`): what a collapsed agent left on the table."""

    rule: str
    sharpe: float  # annualised, per bar, as the agent's validation Sharpe
    bars: int  # validation bars it was judged on
    periods_per_year: float

    @property
    def psr(self) -> float:
        """P(true Sharpe > 0) under normal returns: Phi(per-bar Sharpe x sqrt(bars - 1))."""
        per_bar = self.sharpe / math.sqrt(self.periods_per_year)
        return NormalDist().cdf(per_bar * math.sqrt(max(self.bars - 1, 1)))


DeployRule = Literal["deflated", "confirm", "psr"]


@dataclass(frozen=True)
class DeployTest:
    """What a fold's deploy rule weighed, per bar: the chosen epoch's validation Sharpe against
    the Sharpe it had to beat, `sr0`, and P(true Sharpe > sr0). Rule `deflated` (Bailey & Lopez
    de Prado 2014, "The deflated Sharpe ratio"): sr0 is the expected best of the fold's
    `candidates` epochs had none any skill, from the spread of their validation Sharpes, so
    picking the best of many is not taken for an edge; rule `confirm`: sr0 = 0 on the end of
    validation that the choice of epoch never saw; rule `psr`: sr0 = 0 (flat)."""

    rule: DeployRule
    candidates: int  # epochs the choice was made from
    sharpe: float | None  # the chosen epoch's per-bar validation Sharpe; None if constant
    sr0: float
    p: float | None  # None: constant returns (e.g. never in the market)

    def doc(self, periods_per_year: float) -> dict[str, Any]:
        """Annualised, as the fold's other Sharpes are reported."""
        scale = math.sqrt(periods_per_year)
        return {"rule": self.rule, "candidates": self.candidates,
                "sharpe": None if self.sharpe is None else self.sharpe * scale,
                "sr0": self.sr0 * scale, "p": self.p}


def deploy_test(returns: np.ndarray, candidates: Sequence[float], rule: DeployRule) -> DeployTest:
    """The rule's test of the chosen epoch's validation `returns` (rule `confirm`: those of the
    confirmation slice), picked as the best of the epochs whose per-bar validation Sharpes are
    `candidates` (a flat epoch's is 0)."""
    found = deflated_sharpe(returns, candidates if rule == "deflated" else [0.0])
    if found is None:
        return DeployTest(rule, len(candidates), None, 0.0, None)
    return DeployTest(rule, len(candidates), found.sharpe, found.sr0, found.dsr)


def deploy_decision(test: DeployTest, min_p: float, periods_per_year: float) -> tuple[Deployed, str]:
    """("agent" | "flat", why): the agent where the rule's P(true Sharpe > sr0) reaches
    `min_p` ([walkforward] deploy_min_psr)."""
    shown = "n/a" if test.p is None else f"{test.p:.2f}"
    name = {"deflated": "DSR", "confirm": "confirmation PSR"}.get(test.rule, "PSR")
    against = ""
    if test.rule == "deflated":
        sr0 = test.sr0 * math.sqrt(periods_per_year)
        against = f" against Sharpe {_num(sr0)}, the expected best of {test.candidates} epochs"
    elif test.rule == "confirm":
        against = f" on bars the choice of {test.candidates} epochs never saw"
    if (0.0 if test.p is None else test.p) >= min_p:
        return "agent", f"validation {name} {shown}{against} >= deploy_min_psr {min_p:g}"
    return "flat", f"{NO_EDGE}: validation {name} {shown}{against} < deploy_min_psr {min_p:g}"


def fold_verdict(fold: int, deployed: str, val: Mapping[str, Any],
                 train_eval: Mapping[str, Any] | None, gap_p: float | None, min_psr: float,
                 health: Sequence[str] = (), opportunity: Opportunity | None = None) -> str:
    """One line: what the fold deployed and why, then what the run shows where it shows it:
    memorising (on the training slice a significant edge of its own, and a Sharpe significantly
    above validation's, both at the deploy level and above even odds), collapsed to flat (no
    position on at least `COLLAPSED_FLAT` of the validation bars), and the `health` notes
    (`health_notes`). `val` and `train_eval` are rollout summaries (`WindowResult.summary`);
    `gap_p` is P(train Sharpe > val Sharpe). A collapse names the `opportunity` it missed where
    that rule's edge on validation reaches the deploy level: the market had something to take."""
    head = "deployed agent" if deployed == "agent" else NO_EDGE
    psr = val.get("psr")
    psr_text = "n/a" if psr is None else f"{psr:.2f}"
    out = f"fold {fold}: {head} (val Sharpe {_num(val['sharpe'])}, PSR {psr_text})"
    notes = []
    train_psr = None if train_eval is None else train_eval.get("psr")
    if _at_least(train_psr, min_psr) and _at_least(gap_p, min_psr):
        notes.append(f"memorising (train Sharpe {_num(train_eval['sharpe'])} vs val "
                     f"{_num(val['sharpe'])})")
    if val.get("flat", 0.0) >= COLLAPSED_FLAT:
        missed = ""
        if opportunity is not None and opportunity.psr >= min_psr:
            missed = (f" while {opportunity.rule} earned {_num(opportunity.sharpe)} there (PSR "
                      f"{opportunity.psr:.2f})")
        notes.append(f"collapsed to flat (flat {val['flat']:.0%} of validation bars){missed}")
    return "; ".join([out, *notes, *health])


def health_notes(epochs: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the fold's run.jsonl lines (in epoch order) show of divergence and of dead
    exploration, as verdict notes."""
    return [note for note in (diverging(epochs), dead_exploration(epochs)) if note]


def diverging(epochs: Sequence[Mapping[str, Any]]) -> str | None:
    """A note when the value estimates run away, judged on the epochs with updates: a
    non-finite `HEALTH_METRICS` value; C51 mass at the support's edges of at least
    `DIVERGING_EDGE_MASS` in the last epoch; or |mean Q| or the loss grown `DIVERGING_GROWTH`
    times (from at least `GROWTH_FLOOR`) and growing over the last `DIVERGING_EPOCHS` epochs."""
    learned = [e for e in epochs if e.get("updates", 0) > 0]
    if not learned:
        return None
    for e in learned:
        for key in HEALTH_METRICS:
            if key in e and not math.isfinite(e[key]):
                return f"diverging (non-finite {key} at epoch {e['epoch']})"
    last = learned[-1]
    edge = max(last.get("edge_mass", 0.0), last.get("target_edge_mass", 0.0))
    if edge >= DIVERGING_EDGE_MASS:
        return (f"diverging ({edge:.0%} of C51 mass on the support's edges: values beyond "
                f"[{last.get('v_min', math.nan):.3g}, {last.get('v_max', math.nan):.3g}])")
    for key, label in (("mean_q", "|mean Q|"), ("loss", "loss")):
        series = [abs(e[key]) for e in learned if key in e]
        if _runaway(series):
            return (f"diverging ({label} {_num(series[0])} -> {_num(series[-1])} over "
                    f"{len(series)} epochs)")
    return None


def _runaway(series: Sequence[float]) -> bool:
    tail = series[-DIVERGING_EPOCHS - 1:]
    return (len(tail) > DIVERGING_EPOCHS and all(b > a for a, b in pairwise(tail))
            and series[-1] >= DIVERGING_GROWTH * max(series[0], GROWTH_FLOOR))


def dead_exploration(epochs: Sequence[Mapping[str, Any]]) -> str | None:
    """A note when the last epoch's collect steps took one action at least `CONCENTRATED` of
    the time in every branch while the noise that should vary them has gone: the noisy layers'
    mean |sigma| at most `DEAD_SIGMA_SHARE` of the fold's first epoch's, or no noisy layers.
    An epsilon-greedy learner (PQN: `epsilon` in its lines) explores on its schedule, never
    less than its eps_finish: no note."""
    if not epochs or not epochs[-1].get("action_mix") or epochs[-1].get("epsilon", 0) > 0:
        return None
    last = epochs[-1]
    top = min(max(branch) for branch in last["action_mix"])
    if top < CONCENTRATED:
        return None
    mix = f"one action >= {top:.0%} of collect steps in every branch"
    if "noisy_sigma" not in last:
        return f"dead exploration (no noisy layers; {mix})"
    start, now = epochs[0]["noisy_sigma"], last["noisy_sigma"]
    if start <= 0 or now > DEAD_SIGMA_SHARE * start:
        return None
    return f"dead exploration (noisy sigma {now:.2g}, {now / start:.0%} of its start; {mix})"


def _at_least(p: float | None, level: float) -> bool:
    return p is not None and p >= level and p > 0.5


def _num(x: float) -> str:
    return f"{x:.1f}" if abs(x) < 10 else f"{x:.0f}"

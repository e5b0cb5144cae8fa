"""Whether a fold deploys its agent, and a one-line verdict on what its run showed.

Both read validation and training-window numbers only, never the test window's: the deploy
decision is part of model selection, and the test window judges what it chose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

NO_EDGE = "no edge: flat"
COLLAPSED_FLAT = 0.99
"""Share of validation bars spent flat from which a policy counts as collapsed to flat."""

Deployed = Literal["agent", "flat"]


def deploy_decision(val_psr: float | None, min_psr: float) -> tuple[Deployed, str]:
    """("agent" | "flat", why) from the chosen epoch's validation PSR against flat (P(true
    Sharpe > 0)). Constant returns (None: e.g. never in the market) show no edge."""
    shown = "n/a" if val_psr is None else f"{val_psr:.2f}"
    if (0.0 if val_psr is None else val_psr) >= min_psr:
        return "agent", f"validation PSR {shown} >= deploy_min_psr {min_psr:g}"
    return "flat", f"{NO_EDGE}: validation PSR {shown} < deploy_min_psr {min_psr:g}"


def fold_verdict(fold: int, deployed: str, val: Mapping[str, Any],
                 train_eval: Mapping[str, Any] | None, gap_p: float | None, min_psr: float) -> str:
    """One line: what the fold deployed and why, then what the run shows where it shows it:
    memorising (on the training slice a significant edge of its own, and a Sharpe significantly
    above validation's, both at the deploy level and above even odds) or collapsed to flat (no
    position on at least `COLLAPSED_FLAT` of the validation bars). `val` and `train_eval` are
    rollout summaries (`WindowResult.summary`); `gap_p` is P(train Sharpe > val Sharpe)."""
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
        notes.append(f"collapsed to flat (flat {val['flat']:.0%} of validation bars)")
    return "; ".join([out, *notes])


def _at_least(p: float | None, level: float) -> bool:
    return p is not None and p >= level and p > 0.5


def _num(x: float) -> str:
    return f"{x:.1f}" if abs(x) < 10 else f"{x:.0f}"

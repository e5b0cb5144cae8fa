"""Paper trading: stored bars replayed as a feed, a rule strategy or a trained agent deciding
at each close on incrementally computed features, orders through risk and the OMS to the
simulated venue, everything in the durable event log, restartable after a crash. The layer
above `execution` (and `backtest`, whose strategies and fill model it shares), below the CLI."""

from foxhunt.paper.mirror import EnvMirror
from foxhunt.paper.policy import AgentDecider, LoadedPolicy, RuleDecider, load_agent, load_rule
from foxhunt.paper.runner import PaperFill, PaperResult, PaperTrader, ReconciliationError

__all__ = [
    "AgentDecider", "EnvMirror", "LoadedPolicy", "PaperFill", "PaperResult", "PaperTrader",
    "ReconciliationError", "RuleDecider", "load_agent", "load_rule",
]  # fmt: skip

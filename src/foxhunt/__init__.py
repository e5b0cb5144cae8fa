"""foxhunt: deep-RL trading agents for futures, trained at GPU speed and validated walk-forward."""

__version__ = "0.1.0"

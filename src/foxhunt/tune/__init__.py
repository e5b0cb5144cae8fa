"""Hyperparameter search (`foxhunt tune`): Optuna studies over TOML bounds, a crash-safe PSO
sampler, trials scored on walk-forward validation alone, the deflated Sharpe ratio and PBO of
the choice. A layer above `training` and `backtest`, below the CLI (docs/tune.md)."""

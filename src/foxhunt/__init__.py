"""foxhunt: deep-RL trading agents for futures, trained at GPU speed and validated walk-forward.

The Python API (`foxhunt.api`, docs/api.md) is re-exported here lazily: `import foxhunt` reads
no torch, pandas or DuckDB, so the CLI and `foxhunt --help` stay quick; the first use of a
name below imports it.

    import foxhunt
    bars = foxhunt.load_bars("ES", "1min")
    result = foxhunt.run_backtest(bars, "sma:10,30")
"""

__version__ = "0.1.0"

__all__ = [
    "BacktestResult",
    "Policy",
    "import_bars",
    "load_bars",
    "load_sample",
    "make_env",
    "policy_from_sb3",
    "run_backtest",
    "train",
    "write_report",
]


def __getattr__(name: str):
    """A public API name, imported on first use and kept (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'foxhunt' has no attribute {name!r}")
    # import_module, not an import statement: every layer imports `foxhunt` for __version__,
    # and the API at the top imports every layer; the lazy hop is not a layer dependency.
    from importlib import import_module

    value = getattr(import_module("foxhunt.api"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

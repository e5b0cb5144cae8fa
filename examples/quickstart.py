# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # foxhunt quickstart
#
# From a CSV of bars to a backtested signal, a trained agent and an HTML report, with the
# Python API (`docs/api.md`). It runs in under a minute on a laptop CPU: the training budget
# here is tiny, enough to show the path, not to learn anything.
#
# Everything happens in a throwaway `FOXHUNT_HOME`; delete the next cell's `environ` line to
# use your own (`~/.foxhunt`).

# %%
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import foxhunt
from foxhunt.data.resample import resample
from foxhunt.data.sample import load_sample_ticks

home = Path(tempfile.mkdtemp(prefix="foxhunt-quickstart-"))
os.environ["FOXHUNT_HOME"] = str(home)  # read at each call: foxhunt works in `home` now

# %% [markdown]
# ## 1. A CSV of bars
#
# Here we write one from the real E-mini S&P 500 trades bundled with foxhunt (2013-09-01..03),
# resampled to one-minute bars. Your own file needs a timestamp column and open, high, low,
# close, volume; timestamps may be ISO times or epoch numbers, stamped at the bar's close
# (`ts_is_open=True` if they mark its open).

# %%
minute = resample(load_sample_ticks(), "1min")
csv = home / "es_1min.csv"
pd.DataFrame({
    "ts": pd.to_datetime(minute.ts, unit="ns", utc=True).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "open": minute.open, "high": minute.high, "low": minute.low, "close": minute.close,
    "volume": minute.volume,
}).to_csv(csv, index=False)
print(csv.read_text().splitlines()[:3])

# %% [markdown]
# ## 2. Import it
#
# `import_bars` validates the file (a bad row is one error naming it; nothing is stored) and
# stores it, as `foxhunt data import es_1min.csv --symbol ES` would. `load_bars` reads it back
# later: a DataFrame indexed by bar close time in UTC.

# %%
bars = foxhunt.import_bars(csv, "ES")
bars.tail()

# %% [markdown]
# ## 3. Backtest a signal
#
# A signal is the target position in contracts for each bar (+ long, - short, 0 flat). The
# value at bar t is decided at t's close, so it may use bars up to t (a rolling mean does);
# the order fills at the next bar's open with one tick of slippage plus commission: the fill
# model the agent trains on. Baselines run beside it on the same bars.

# %%
fast, slow = bars.close.rolling(10).mean(), bars.close.rolling(30).mean()
signal = np.sign(fast - slow).fillna(0)  # 1 contract, long above, short below

result = foxhunt.run_backtest(bars, signal, name="sma 10/30", baselines=["buy-and-hold", "flat"])
pd.DataFrame({name: r.metrics for name, r in {result.name: result, **result.baselines}.items()}
             ).loc[["total_return", "sharpe", "max_drawdown", "trades", "win_rate", "costs_paid"]]

# %%
result.trades.head()

# %%
result.equity.iloc[::120]

# %% [markdown]
# ## 4. Train an agent
#
# Walk-forward: each fold trains, picks its best epoch on a validation window and is judged
# once on a test window it never saw; a fold that shows no edge on validation deploys flat.
# The keyword sections override the settings like a config file; these are tiny.

# %%
run = foxhunt.train(
    "ES", folds=1, epochs=1, updates_per_fold=10, device="cpu", seed=0, out=home / "runs" / "quick",
    env={"window": 4, "episode_len": 32}, agent={"hidden": 32, "atoms": 11},
    replay={"capacity": 4096},
    train={"replay_ratio": 2.5, "learning_starts": 64, "batch_size": 32, "n_envs": 16,
           "eval_windows": 4},
    walkforward={"purge": 8},
)
pd.DataFrame(run.table())

# %% [markdown]
# The fold's chosen model, backtested on its test window against buy-and-hold:

# %%
fold = run.folds[0]
test_start = bars.index[fold.windows["test"][0]]
agent = foxhunt.run_backtest(bars, fold.checkpoint, name="agent", start=test_start,
                             baselines=["buy-and-hold"])
print(agent)

# %% [markdown]
# ## 5. The Gymnasium env, and any policy
#
# `make_env` is the same env as a `gymnasium.Env` (Discrete(27) actions: direction x size x
# stop), for Stable-Baselines3 and friends. `info["equity"]` is the account: capital plus the
# episode's PnL. Any callable `obs -> action` backtests through the same fill model; with SB3:
#
# ```python
# from stable_baselines3 import DQN
# model = DQN("MlpPolicy", env).learn(10_000)
# foxhunt.run_backtest(bars, foxhunt.policy_from_sb3(model, env))
# ```

# %%
env = foxhunt.make_env(bars, env={"window": 4, "episode_len": 32})
obs, _ = env.reset(seed=0)
for _ in range(5):
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
{k: info[k] for k in ("position", "pnl", "cost", "episode_pnl", "equity")}

# %%
n_features = (env.observation_space.shape[0] - 6) // 4  # 4 bars of features, 6 position values
LONG, SHORT = 9, 18  # (direction, size, stop) = (1, 0, 0) and (2, 0, 0), flattened


def momentum(obs):
    """Long after an up bar, short after a down one: the latest bar's first feature (its
    1-bar return, normalised)."""
    return LONG if obs[3 * n_features] > 0 else SHORT


policy = foxhunt.Policy(momentum, env=env.unwrapped.vec.config, name="momentum")
foxhunt.run_backtest(bars, policy, start=test_start)

# %% [markdown]
# ## 6. Reports
#
# One self-contained HTML page each (no network needed to open it).

# %%
print(foxhunt.write_report(result, home / "signal.html"))
print(foxhunt.write_report(run, home / "run.html"))

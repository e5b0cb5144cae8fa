"""Gymnasium faces of `TradingVecEnv`, so other libraries (e.g. Stable-Baselines3) can train on it.

Actions are the 27 factored actions flattened to one index (`flatten_actions`); observations are
`TradingVecEnv.observe` rows. Both wrappers own a torch generator seeded from `reset(seed=...)`.

`info` holds the step's reward components in dollars (`pnl` is the bar's mark-to-market PnL,
`cost` its commission and slippage), `position`, `trades_closed`, `episode_pnl` (the episode's
PnL after costs so far: the vector env's own equity, which starts at 0) and `equity`, the
account: `capital` + `episode_pnl`, as a backtest's equity curve counts it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from foxhunt.env.actions import N_ACTIONS, unflatten_actions
from foxhunt.env.config import EnvConfig
from foxhunt.env.fills import CostModel
from foxhunt.env.market import MarketTensors
from foxhunt.env.vector_env import StepResult, TradingVecEnv


def _spaces(env: TradingVecEnv) -> tuple[spaces.Discrete, spaces.Box]:
    obs = spaces.Box(-np.inf, np.inf, shape=(env.obs_dim,), dtype=np.float32)
    return spaces.Discrete(N_ACTIONS), obs


DEFAULT_CAPITAL = 100_000.0
"""The account an episode starts with, as the backtester's and the trainer's default."""


def _info(result: StepResult, capital: float) -> dict[str, np.ndarray]:
    info = {name: v.cpu().numpy() for name, v in result.components.items()}
    info["position"] = result.position.cpu().numpy()
    info["episode_pnl"] = result.equity.cpu().numpy()
    info["equity"] = capital + info["episode_pnl"]
    info["trades_closed"] = result.trades_closed.cpu().numpy()
    return info


class TradingEnv(gym.Env):
    """One episode at a time on the CPU: Discrete(27) actions, Box float32 observations.

    `reset(options={"start": bar})` starts at a chosen bar instead of a random one; `capital`
    is the account `info["equity"]` counts from.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        market: MarketTensors,
        config: EnvConfig,
        cost: CostModel | None = None,
        start_range: tuple[int, int] | None = None,
        capital: float = DEFAULT_CAPITAL,
    ):
        self.capital = capital
        self._generator = torch.Generator()
        self.vec = TradingVecEnv(
            market, config, cost, 1, "cpu", self._generator, start_range=start_range
        )
        self.action_space, self.observation_space = _spaces(self.vec)
        self._seeded = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            self._generator.manual_seed(int(self.np_random.integers(2**62)))
            self._seeded = True
        start = (options or {}).get("start")
        starts = None if start is None else torch.tensor([start])
        return self.vec.reset(starts)[0].numpy(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        result = self.vec.step(unflatten_actions(torch.tensor([int(action)])))
        obs = self.vec.observe(result.next_bar, result.next_pos_state)[0].numpy()
        info = {k: v[0].item() for k, v in _info(result, self.capital).items()}
        return (
            obs,
            float(result.reward[0]),
            bool(result.terminated[0]),
            bool(result.truncated[0]),
            info,
        )


class TradingVectorEnv(VectorEnv):
    """`num_envs` episodes with numpy in and out; same-step autoreset.

    Where an episode ended, `obs` already belongs to the next episode and
    `infos["final_obs"][i]` (with `infos["_final_obs"][i]` True) is the last observation of the
    finished one. Other infos hold the reward components in dollars, position, equity
    (`capital` + the episode's PnL) and episode_pnl, one value per env.
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        market: MarketTensors,
        config: EnvConfig,
        num_envs: int,
        cost: CostModel | None = None,
        device: torch.device | str = "cpu",
        start_range: tuple[int, int] | None = None,
        capital: float = DEFAULT_CAPITAL,
    ):
        self.capital = capital
        self._generator = torch.Generator(device=device)
        self.vec = TradingVecEnv(
            market, config, cost, num_envs, device, self._generator, start_range=start_range
        )
        self.num_envs = num_envs
        self.single_action_space, self.single_observation_space = _spaces(self.vec)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._seeded = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self._np_random, self._np_random_seed = gym.utils.seeding.np_random(seed)
        if seed is not None or not self._seeded:
            self._generator.manual_seed(int(self.np_random.integers(2**62)))
            self._seeded = True
        starts = (options or {}).get("starts")
        starts = None if starts is None else torch.as_tensor(np.asarray(starts))
        return self.vec.reset(starts).cpu().numpy(), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        index = torch.as_tensor(np.asarray(actions), device=self.vec.device)
        result = self.vec.step(unflatten_actions(index))
        infos: dict[str, Any] = _info(result, self.capital)
        infos["final_obs"] = self.vec.observe(result.next_bar, result.next_pos_state).cpu().numpy()
        infos["_final_obs"] = (result.terminated | result.truncated).cpu().numpy()
        return (
            result.obs.cpu().numpy(),
            result.reward.cpu().numpy(),
            result.terminated.cpu().numpy(),
            result.truncated.cpu().numpy(),
            infos,
        )

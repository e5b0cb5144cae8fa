"""The Stable-Baselines3 peer of bench_train.py: SB3's DQN on foxhunt's Gymnasium wrapper, timed
in learn() and in train() alone, and foxhunt's update rate against it."""

from __future__ import annotations

import torch
from _common import log, time_block

from foxhunt.env import EnvConfig, MarketTensors
from foxhunt.training.walkforward import Window


def measure_sb3(market: MarketTensors, window: Window, env_config: EnvConfig, hidden: int,
                batch_size: int, warmup: int, steps: tuple[int, int, int], device: torch.device,
                seed: int) -> dict:
    """SB3 DQN on our Gymnasium wrapper: env-steps/s in learn(), gradient updates/s in train();
    `steps` are (random-action steps filling its buffer, learn() steps, train()-only steps)."""
    try:
        import stable_baselines3
        from stable_baselines3 import DQN
    except ImportError:
        return {"skipped": "stable-baselines3 not installed"}
    from foxhunt.env.gym_wrapper import TradingEnv

    env = TradingEnv(market, env_config, start_range=(window.start, window.stop))
    starts, learn_steps, train_steps = steps
    model = DQN(
        "MlpPolicy", env, learning_rate=1e-4, buffer_size=starts + learn_steps,
        learning_starts=starts, batch_size=batch_size, train_freq=1, gradient_steps=1,
        exploration_initial_eps=0.05, exploration_final_eps=0.05,
        policy_kwargs={"net_arch": [hidden, hidden]},
        device=device.type, seed=seed, verbose=0,
    )
    log(f"sb3: {starts} random-action steps to fill its buffer")
    fill_s = time_block(lambda: model.learn(total_timesteps=starts), device)
    model.train(gradient_steps=warmup, batch_size=batch_size)  # warm-up, untimed
    log(f"sb3: learn() for {learn_steps} steps, one gradient step each")
    updates_before = model._n_updates
    learn_s = time_block(
        lambda: model.learn(total_timesteps=learn_steps, reset_num_timesteps=False), device)
    learn_updates = model._n_updates - updates_before
    log(f"sb3: train() alone for {train_steps} gradient steps")
    train_s = time_block(
        lambda: model.train(gradient_steps=train_steps, batch_size=batch_size), device)
    return {
        "version": stable_baselines3.__version__,
        "setup": {"algorithm": "DQN", "policy": "MlpPolicy",
                  "net_arch": [hidden, hidden], "batch_size": batch_size,
                  "train_freq": 1, "gradient_steps": 1, "learning_starts": starts,
                  "buffer_size": starts + learn_steps, "epsilon": 0.05,
                  "env": "foxhunt.env.gym_wrapper.TradingEnv, Discrete(27), one env on the CPU",
                  "device": device.type},
        "random_actions": {"env_steps": starts, "seconds": round(fill_s, 3),
                           "env_steps_per_s": round(starts / fill_s, 1)},
        "learn": {"env_steps": learn_steps, "updates": learn_updates, "seconds": round(learn_s, 3),
                  "env_steps_per_s": round(learn_steps / learn_s, 1),
                  "updates_per_s": round(learn_updates / learn_s, 1)},
        "train_only": {"updates": train_steps, "seconds": round(train_s, 3),
                       "updates_per_s": round(train_steps / train_s, 1)},
    }


def sb3_ratio(sb3: dict, foxhunt_updates_per_s: float | None, ratio_min: float,
              target_device: str) -> dict:
    """foxhunt's updates/s against SB3's train()-only updates/s, judged against `ratio_min`."""
    if "skipped" in sb3:
        return sb3
    if foxhunt_updates_per_s is None:
        return {**sb3, "ratio_train_only": None}
    ratio = foxhunt_updates_per_s / sb3["train_only"]["updates_per_s"]
    return {
        **sb3,
        "foxhunt_updates_per_s": foxhunt_updates_per_s,
        "ratio": round(ratio, 2),
        "ratio_basis": "foxhunt update.updates_per_s / sb3 train_only.updates_per_s "
                       "(both exclude env stepping)",
        "ratio_vs_learn": round(foxhunt_updates_per_s / sb3["learn"]["updates_per_s"], 2),
        "target": {"ratio_min": ratio_min, "on": target_device},
        "target_met": bool(ratio >= ratio_min),
    }

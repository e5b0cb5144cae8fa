"""The walk-forward trainer: run directory, per-fold table, determinism, resume."""

from __future__ import annotations

import json
import re

import pytest
import torch

from foxhunt.errors import ConfigError
from foxhunt.training import trainer as trainer_module
from foxhunt.training.checkpoint import load_policy
from foxhunt.training.evaluate import constant_policy
from foxhunt.training.trainer import FULL_LONG, WalkForwardTrainer
from foxhunt.training.verdict import Opportunity

from .builders import instrument, pipeline, synth, tiny_spec

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def market():
    return synth(3_000, 0.3, seed=11)


def make(market, run_dir, spec=None, **kw):
    return WalkForwardTrainer(spec or tiny_spec(), market.bars, pipeline(), instrument(), run_dir, CPU, **kw)


def read_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def deploying_always(spec):
    """`spec` with the deploy rule off: every fold deploys its agent."""
    return spec.model_copy(update={"walkforward": spec.walkforward.model_copy(
        update={"deploy_min_psr": 0.0})})


def test_run_directory_and_fold_table(market, tmp_path):
    seen = []
    trainer = make(market, tmp_path, on_epoch=seen.append)
    result = trainer.run()
    assert {p.name for p in tmp_path.iterdir()} >= {"spec.json", "run.jsonl", "timings.jsonl",
                                                      "folds.json", "checkpoints"}
    assert {p.name for p in (tmp_path / "checkpoints").iterdir()} == {
        "fold0.pt", "fold0_last.pt", "fold1.pt", "fold1_last.pt"}
    lines = read_lines(tmp_path / "run.jsonl")
    assert [(x["fold"], x["epoch"]) for x in lines] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for key in ("loss", "mean_q", "td_p99", "grad_norm", "action_mix", "flat", "val", "train_eval",
                "gap", "gap_p"):
        assert key in lines[-1]
    for line in lines:  # the same metrics on both windows, so that memorising shows as a gap
        assert set(line["val"]) == set(line["train_eval"]) >= {"sharpe", "psr", "trades",
                                                               "trade_rate", "flat", "bars"}
        assert line["train_eval"]["bars"] == line["val"]["bars"]
        assert line["gap"] == line["train_eval"]["sharpe"] - line["val"]["sharpe"]
    assert len(lines[-1]["action_mix"]) == 3 and abs(sum(lines[-1]["action_mix"][0]) - 1) < 1e-9
    timings = read_lines(tmp_path / "timings.jsonl")
    assert all(t["experience_ms"] > 0 and t["training_ms"] >= 0 and t["validation_ms"] > 0 for t in timings)
    assert all(t["compiled"] is False and t["cuda_graphs"] is False for t in timings)  # CPU: eager
    assert len(seen) == 4
    table = result.table()
    assert [r["fold"] for r in table] == [0, 1]
    for row in table:
        assert set(row) >= {"val_sharpe", "test_sharpe", "test_return", "test_max_drawdown", "test_trades"}
    for row in table:
        assert row["deployed"] in ("agent", "no edge: flat")
    folds = json.loads((tmp_path / "folds.json").read_text())
    assert folds[1]["fold"] == 1
    for doc in folds:
        assert doc["deployed"] in ("agent", "flat") and doc["reason"]
        assert doc["verdict"].startswith(f"fold {doc['fold']}: ")
        assert set(doc["train_eval"]) == set(doc["val"])
        assert load_policy(doc["checkpoint"]).observation == trainer.observation
    assert trainer.folds[0].train.start >= trainer.observation.first_decision()


def test_test_windows_follow_validation_windows(market, tmp_path):
    folds = make(market, tmp_path).folds
    for f in folds:
        assert f.train.stop <= f.val.start and f.val.stop <= f.test.start
        assert f.train.start >= pipeline().warmup + tiny_spec().env.window - 1


@pytest.mark.parametrize("average_epochs", [0.0, 0.5])
def test_best_validation_epoch_is_kept_and_the_test_window_is_rolled_out_once_at_the_end(
        market, tmp_path, average_epochs):
    """Model selection sees validation only: the kept model is the epoch with the highest
    validation Sharpe among the fold's last half (`choose_from_last`; validated beside the
    training slice every epoch, then once more for the kept model's row and the deploy
    decision), and each fold's test window is rolled out once, after that. With a weight
    average the average is what is judged, kept and saved."""
    epochs = 4
    spec = tiny_spec(epochs=epochs, average_epochs=average_epochs)
    trainer = make(market, tmp_path, deploying_always(spec))
    calls, val_runs = [], []
    evaluate = trainer.evaluate_windows

    def watched(ctx, market_, windows, chunks=None):
        names = {ctx.fold.val: "val", ctx.fold.test: "test", trainer.train_slice(ctx.fold): "train"}
        phases = tuple(names[w] for w in windows)
        calls.append((ctx.fold.index, phases))
        results = evaluate(ctx, market_, windows, chunks)
        if "val" in phases:
            state = ctx.learner.policy_net.state_dict()
            val_runs.append((results[phases.index("val")].sharpe,
                             {k: v.clone() for k, v in state.items()}))
        return results

    trainer.evaluate_windows = watched
    result = trainer.run()
    per_fold = [("val", "train")] * (epochs + 1) + [("test",)]
    assert calls == [(k, phase) for k in (0, 1) for phase in per_fold]
    by_fold = (val_runs[:epochs + 1], val_runs[epochs + 1:])
    for report, runs in zip(result.folds, by_fold, strict=True):
        sharpes = [sharpe for sharpe, _ in runs[:epochs]]
        first = trainer.first_candidate
        assert first == 2 and report.best_epoch == first + sharpes[first:].index(max(sharpes[first:]))
        assert report.val["sharpe"] == runs[-1][0] == max(sharpes[first:])
        kept = runs[report.best_epoch][1]
        saved = torch.load(tmp_path / "checkpoints" / f"fold{report.fold}.pt", weights_only=True)
        assert all(torch.equal(saved["state_dict"][k], kept[k]) for k in kept)


@pytest.mark.parametrize("head", ["c51", "iqn"])
def test_same_seed_gives_identical_run_log_on_cpu(market, tmp_path, head):
    """Every random draw of a CPU run (noise, replay, env starts, IQN's taus) comes from the
    learner's seeded generator."""
    def spec(**train):
        s = tiny_spec(**train)
        return s.model_copy(update={"agent": s.agent.model_copy(update={"head": head})})

    make(market, tmp_path / "a", spec()).run()
    torch.rand(3)  # the global generator's state must not matter
    make(market, tmp_path / "b", spec()).run()
    assert (tmp_path / "a" / "run.jsonl").read_text() == (tmp_path / "b" / "run.jsonl").read_text()
    make(market, tmp_path / "c", spec(seed=1)).run()
    assert (tmp_path / "a" / "run.jsonl").read_text() != (tmp_path / "c" / "run.jsonl").read_text()


def test_graph_block_sizes_change_nothing_on_the_cpu(market, tmp_path):
    """collect_steps_per_graph and updates_per_graph group CUDA-graph replays; without graphs
    every step runs one by one, in the same order."""
    make(market, tmp_path / "a", tiny_spec()).run()
    make(market, tmp_path / "b", tiny_spec(performance={"updates_per_graph": 4, "collect_steps_per_graph": 3})).run()
    assert (tmp_path / "a" / "run.jsonl").read_text() == (tmp_path / "b" / "run.jsonl").read_text()


@pytest.mark.parametrize("average_epochs", [0.0, 0.5])
def test_resume_continues_after_an_interruption(market, tmp_path, average_epochs):
    spec = tiny_spec(epochs=3, average_epochs=average_epochs)

    def crash_after_fold1_epoch0(line):
        if line["fold"] == 1 and line["epoch"] == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make(market, tmp_path, spec, on_epoch=crash_after_fold1_epoch0).run()
    result = make(market, tmp_path, spec).run(resume=True)
    lines = read_lines(tmp_path / "run.jsonl")
    assert [(x["fold"], x["epoch"]) for x in lines] == [(f, e) for f in (0, 1) for e in range(3)]
    assert [r["fold"] for r in result.table()] == [0, 1]


def test_resume_refuses_other_settings(market, tmp_path):
    make(market, tmp_path).run()
    with pytest.raises(ConfigError, match="other settings"):
        make(market, tmp_path, tiny_spec(epochs=3)).run(resume=True)


def test_too_little_data_for_the_folds_is_a_clear_error_naming_what_fits(tmp_path):
    small = synth(700, 0.0)
    with pytest.raises(ConfigError, match=r"too few for 20 folds .*set \[walkforward\] folds = \d+ or fewer"):
        _ = make(small, tmp_path, tiny_spec(folds=20)).folds
    with pytest.raises(ConfigError, match=r"300 bars leave none to split: the first usable bar is "
                                          r"\d+ \(the features' warm-up"):
        _ = make(synth(300, 0.0), tmp_path, tiny_spec()).folds


def test_a_folds_learner_is_released_before_the_next_fold_builds_its_own(market, tmp_path):
    """Fold k's replay, graphs and device tensors are not held while fold k+1 allocates its
    own (on a GPU that would be two folds' memory at once)."""
    import gc
    import weakref

    trainer = make(market, tmp_path)
    learners, alive_at_start = [], []
    start = trainer.start_fold

    def start_fold(fold):
        gc.collect()
        alive_at_start.append([ref() is not None for ref in learners])
        ctx = start(fold)
        learners.append(weakref.ref(ctx.learner))
        return ctx

    trainer.start_fold = start_fold
    trainer.run()
    assert alive_at_start == [[], [False]]


def test_later_folds_reuse_the_first_folds_compiled_steps(market, tmp_path):
    """Rolling folds give every learner a market of the same length and an env of the same
    bounds (`learner_window`), so dynamo's guards on the compiled steps (tensor shapes, the
    env's start range) hold in folds 2..k and nothing is traced again, but the optimiser step,
    which dynamo guards on the optimiser object itself. (On the CPU with dynamo's eager
    backend: the guards are the device's.)"""
    import logging

    from foxhunt.training.compiled import CompiledSteps

    def eager_backend(fn, dynamic, **options):
        return torch.compile(fn, backend="eager", dynamic=dynamic)

    recompiled: list[str] = []

    class Recompiles(logging.Handler):
        def emit(self, record):
            first = record.getMessage().splitlines()[0]
            if first.startswith("Recompiling function"):
                recompiled.append(first.split()[2])

    torch._dynamo.reset()
    trainer = make(market, tmp_path, tiny_spec(folds=3))
    handler, logger = Recompiles(), logging.getLogger("torch._dynamo")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(handler)
    try:
        for fold in trainer.folds:
            if fold.index == 1:
                recompiled.clear()  # fold 0 compiled everything
            lr = trainer.start_fold(fold).learner
            lr.generator = lr.replay.generator = lr.env.generator = None  # as on CUDA
            steps = CompiledSteps(lr, compiler=eager_backend)
            steps.run_collect(8)
            steps.run_updates(3)
            del lr, steps
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()
    assert set(recompiled) <= {"apply_gradients"}, recompiled
    assert [f.train.stop - f.train.start for f in trainer.folds] == [len(trainer.folds[0].train)] * 3


def test_a_run_splits_its_wall_into_phases(market, tmp_path):
    """phases.json: setup and compiling, collecting, updating, validating, testing, the rest,
    the total, and the share of the wall after setup spent collecting and updating; the epoch
    lines time the same phases."""
    result = make(market, tmp_path).run()
    phases = json.loads((tmp_path / "phases.json").read_text())
    assert phases == result.phases
    named = ("setup_compile_s", "experience_s", "updates_s", "validation_s", "test_s")
    assert all(phases[k] > 0 for k in named)
    assert phases["other_s"] >= 0
    assert sum(phases[k] for k in (*named, "other_s")) == pytest.approx(phases["total_s"], abs=0.01)
    assert phases["post_compile_s"] == pytest.approx(phases["total_s"] - phases["setup_compile_s"],
                                                     abs=0.01)
    share = (phases["experience_s"] + phases["updates_s"]) / phases["post_compile_s"]
    assert phases["experience_updates_share"] == pytest.approx(share, abs=1e-3)
    timings = read_lines(tmp_path / "timings.jsonl")
    assert sum(t["training_ms"] for t in timings) / 1e3 == pytest.approx(phases["updates_s"], abs=1e-3)
    assert all(t["compile_ms"] == 0 for t in timings)  # the CPU compiles nothing


@pytest.mark.parametrize("every_s, resumes_at", [(0.0, 1), (3600.0, 0)])
def test_the_resume_point_is_saved_at_a_folds_end_and_every_so_often(market, tmp_path,
                                                                      monkeypatch, every_s,
                                                                      resumes_at):
    """Saved after every epoch once RESUME_EVERY_S has passed (0: every epoch), the run resumes
    after the epoch it saved; not saved yet, the fold starts again and its logged epochs go."""
    import foxhunt.training.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "RESUME_EVERY_S", every_s)
    spec = tiny_spec(epochs=3)

    def crash_after_fold1_epoch0(line):
        if line["fold"] == 1 and line["epoch"] == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make(market, tmp_path, spec, on_epoch=crash_after_fold1_epoch0).run()
    seen = []
    make(market, tmp_path, spec, on_epoch=seen.append).run(resume=True)
    assert (seen[0]["fold"], seen[0]["epoch"]) == (1, resumes_at)
    lines = read_lines(tmp_path / "run.jsonl")
    assert [(x["fold"], x["epoch"]) for x in lines] == [(f, e) for f in (0, 1) for e in range(3)]


def test_the_test_window_steps_the_baselines_beside_the_model(market, tmp_path):
    """One rollout of the test window for the model, flat and buy-and-hold: each result is its
    own rollout's, bit for bit."""
    from foxhunt.training.evaluate import constant_policy, greedy_policy, rollout
    from foxhunt.training.trainer import FULL_LONG

    spec = deploying_always(tiny_spec(folds=1))
    trainer = make(market, tmp_path, spec)
    kept = {}
    finish = trainer._finish_fold

    def keep(ctx):
        report = finish(ctx)
        kept["ctx"] = ctx
        return report

    trainer._finish_fold = keep
    report = trainer.run().folds[0]
    ctx = kept["ctx"]
    net = ctx.learner.policy_net.eval()
    args = (ctx.test_market, spec.env, ctx.fold.test, spec.train.capital)
    assert report.deployed == "agent"
    assert report.test == rollout(greedy_policy(net), *args).summary()
    assert report.baselines["flat"] == rollout(constant_policy((0, 0, 0)), *args).summary()
    assert report.baselines["buy_and_hold"] == rollout(constant_policy(FULL_LONG), *args).summary()


def test_a_validation_scoped_run_never_reads_a_test_window(market, tmp_path):
    """`scope="validation"` (what a search scores trials with): every fold stops at its
    validation window. Bars after the last validation window, rewritten to anything, change
    no line of the run log and no fold's validation result, and no fold has test results."""
    folds = make(market, tmp_path / "x").folds
    stop = folds[-1].val.stop
    bars = market.bars
    columns = {k: (None if v is None else v.copy()) for k, v in bars.columns().items()}
    for name in ("open", "high", "low", "close"):
        columns[name][stop:] = columns[name][stop:][::-1] * 1.5
    altered = type(bars)(**columns)
    runs = []
    for name, b in (("a", bars), ("b", altered)):
        trainer = WalkForwardTrainer(tiny_spec(), b, pipeline(), instrument(), tmp_path / name, CPU,
                                     scope="validation")
        runs.append((trainer.run(), read_lines(tmp_path / name / "run.jsonl")))
    (first, log_a), (second, log_b) = runs
    assert log_a == log_b
    assert [f.val for f in first.folds] == [f.val for f in second.folds]
    assert all(f.test is None and f.baselines == {} for f in first.folds)
    assert all(r["test_sharpe"] is None for r in first.table())
    assert {p.name for p in (tmp_path / "a").iterdir()} >= {"folds.json", "run.jsonl"}


def test_an_unknown_scope_is_a_one_line_error(market, tmp_path):
    with pytest.raises(ConfigError, match="scope 'tests' is not one of test, validation"):
        make(market, tmp_path, scope="tests")


@pytest.mark.parametrize("action, collapsed", [((0, 0, 0), True), (FULL_LONG, False)])
def test_a_fold_collapsed_to_flat_names_the_validation_rule_it_missed(market, tmp_path,
                                                                      monkeypatch, action,
                                                                      collapsed):
    """The opportunity is asked for only where validation stayed flat, with the fold (whose
    validation window is all it may read), and the verdict names the rule and its edge."""
    monkeypatch.setattr(trainer_module, "greedy_policy", lambda net: constant_policy(action))
    asked = []

    def opportunity(fold):
        asked.append(fold.index)
        return Opportunity("sma:5,20", 30.0, len(fold.val), 98_280.0)

    result = make(market, tmp_path, opportunity=opportunity).run()
    assert asked == ([0, 1] if collapsed else [])
    for fold in result.folds:
        assert ("collapsed to flat" in fold.verdict) == collapsed
        named = re.search(r"while sma:5,20 earned 30 there \(PSR 0\.9\d\)", fold.verdict)
        assert (named is not None) == collapsed

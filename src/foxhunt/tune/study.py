"""A study: Optuna asks for configurations, K trials run at once, Optuna is told their scores.

The driver owns the study (ask, tell, the sampler); trials run in worker processes, in threads
of the driver, or as Ray tasks (`BACKENDS`). Each trial reports its running validation score
every epoch to the study's storage, where the pruner judges it.

A study is resumable: `resume=True` loads it from its storage, marks the trials that were
running when it stopped as failed and interrupted (the PSO sampler gives their slots back, so
the swarm evaluates those positions after all) and runs trials until `trials` count (finished,
pruned or failed, not interrupted). The study records what it searched (symbol, bars, space,
sampler, metric, base settings); resuming with other ones is refused.

A trial samples its parameters define-by-run (`SearchSpace.suggest`): the learner kind first
where the space searches it, then the shared keys, then that kind's own; every kind is scored by
the same validation objective, and `kind_table` says per kind how its trials did and which won.

The study directory holds `study.json` (the trial table, best trial, the table per kind, DSR,
PBO, importance), `space.toml`, `best.toml`, and per trial `trials/NNNN/` (its run.jsonl,
folds.json and `val_returns.npz`, the chosen models' validation returns by decision bar).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from foxhunt.configbase import StrictConfig
from foxhunt.errors import ConfigError, FoxhuntError
from foxhunt.fileio import write_text_atomic
from foxhunt.training.trainer import RunResult, WalkForwardTrainer
from foxhunt.tune.objective import (
    COMPLETE,
    FAILED,
    METRICS,
    PRUNED,
    TrialContext,
    TrialOutcome,
    TrialTask,
    init_process,
    make_pruner,
    process_trial,
    ray_trial,
    run_trial,
    storage_prune,
    trial_dir,
)
from foxhunt.tune.pso import INTERRUPTED_ATTR, PSOSampler
from foxhunt.tune.space import KIND_KEY, SearchSpace, apply
from foxhunt.tune.stats import PBO_BLOCKS, deflated_sharpe_of, probability_of_overfitting
from foxhunt.tune.storage import open_storage, safe_url
from foxhunt.tune.tomlfile import best_config, write_toml

SAMPLERS = ("pso", "tpe", "cmaes", "random")
BACKENDS = ("process", "thread", "ray")
STUDY_FILE = "study.json"
BEST_FILE = "best.toml"
RETURNS_FILE = "val_returns.npz"
IDENTITY_ATTR = "foxhunt"


class TuneConfig(StrictConfig):
    """How a study searches and runs (the `foxhunt tune` options)."""

    name: str = Field(min_length=1)
    storage: str = Field(min_length=1, description="SQLAlchemy URL of the Optuna storage")
    trials: int = Field(ge=1, description="trials the study holds when done (resume included)")
    sampler: Literal["pso", "tpe", "cmaes", "random"] = "pso"
    parallel: int = Field(default=1, ge=1, description="trials at once")
    backend: Literal["process", "thread", "ray"] = "process"
    metric: Literal["sharpe", "psr", "return", "pnl"] = "sharpe"
    pruner: Literal["median", "hyperband", "none"] = "median"
    particles: int = Field(default=8, ge=2, description="PSO swarm size")
    seed: int = Field(default=0, ge=0, description="the sampler's seed")
    ray_address: str | None = Field(default=None, description="Ray cluster; None: a local one")
    gpus_per_trial: float | None = Field(
        default=None, gt=0, le=1,
        description="Ray: GPU share per trial (None: 1 / parallel on CUDA, 0 on the CPU)")


def make_sampler(config: TuneConfig, space: SearchSpace):
    import optuna

    if config.sampler == "pso":
        return PSOSampler(space.distributions(), n_particles=config.particles, seed=config.seed)
    if config.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=config.seed)
    if config.sampler == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise ConfigError("sampler cmaes needs the cmaes package: pip install "
                              "'foxhunt[tune]'") from None
        return optuna.samplers.CmaEsSampler(seed=config.seed, warn_independent_sampling=False)
    return optuna.samplers.RandomSampler(seed=config.seed)


def identity(config: TuneConfig, ctx: TrialContext, space: SearchSpace,
             source: dict[str, Any]) -> dict[str, Any]:
    """What a resumed study must share with the one it continues."""
    return {"source": source, "space": space.digest, "sampler": config.sampler,
            "metric": config.metric, "particles": config.particles, "seed": config.seed,
            "settings": ctx.base.model_dump(mode="json"),
            "features": ctx.features.model_dump(mode="json"), "profile": ctx.profile.name}


def open_study(config: TuneConfig, space: SearchSpace, ident: dict[str, Any], resume: bool):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(config.storage)
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    where = safe_url(config.storage)
    sampler = make_sampler(config, space)
    pruner = make_pruner(config.pruner)
    if not resume:
        if config.name in names:
            raise ConfigError(f"study '{config.name}' already exists in {where}; continue it with "
                              "--resume or name a new one with --study NAME")
        study = optuna.create_study(storage=storage, study_name=config.name, sampler=sampler,
                                    pruner=pruner, direction="maximize")
        study.set_user_attr(IDENTITY_ATTR, ident)
        return study
    if config.name not in names:
        raise ConfigError(f"study '{config.name}' not found in {where}; start it without --resume")
    study = optuna.load_study(study_name=config.name, storage=storage, sampler=sampler,
                              pruner=pruner)
    stored = study.user_attrs.get(IDENTITY_ATTR, {})
    for key, value in ident.items():
        if stored.get(key) != value:
            raise ConfigError(f"study '{config.name}' was started with another {key} "
                              f"({_brief(stored.get(key))} now {_brief(value)}); resume it with "
                              "the same settings or start a new study with --study NAME")
    mark_interrupted(study)
    return study


def _brief(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def mark_interrupted(study) -> list[int]:
    """Trials left running or waiting by a driver that stopped: failed, marked interrupted."""
    from optuna.trial import TrialState

    lost = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
        study._storage.set_trial_system_attr(t._trial_id, INTERRUPTED_ATTR, True)
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        lost.append(t.number)
    return lost


def counted_trials(study) -> list[Any]:
    """Trials that count toward the study's size: all but interrupted ones."""
    return [t for t in study.get_trials(deepcopy=False)
            if not t.system_attrs.get(INTERRUPTED_ATTR)]


# -- running trials ----------------------------------------------------------------------------


class _Pool:
    """Runs trial tasks on one backend; `submit` returns a concurrent Future."""

    def __init__(self, config: TuneConfig, ctx: TrialContext, study):
        self.config, self.ctx, self.study = config, ctx, study
        k = config.parallel
        self._ray = None
        if config.backend == "thread":
            self._executor = ThreadPoolExecutor(max_workers=k, thread_name_prefix="trial")
        elif config.backend == "process":
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn: CUDA cannot be used in a forked child, and a fresh interpreter shares no
            # torch state with the driver.
            self._executor = ProcessPoolExecutor(
                max_workers=k, mp_context=multiprocessing.get_context("spawn"),
                initializer=init_process, initargs=(ctx,))
        else:
            self._start_ray()

    def _start_ray(self) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("--backend ray needs Ray: pip install 'foxhunt[ray]'") from None
        k, cuda = self.config.parallel, self.ctx.device != "cpu"
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "configure_logging": False}
            if self.config.ray_address:
                ray.init(address=self.config.ray_address, **kwargs)
            else:  # a local instance with a CPU slot for each of the K trials
                ray.init(num_cpus=max(k, os.cpu_count() or 1), **kwargs)
        share = self.config.gpus_per_trial or (1.0 / k if cuda else 0.0)
        self._share = share
        self._remote = ray.remote(num_cpus=1, num_gpus=share, max_retries=0)(ray_trial)
        self._ctx_ref = ray.put(self.ctx)
        self._ray = ray

    def submit(self, task: TrialTask) -> Future:
        if self._ray is not None:
            return self._remote.remote(self._ctx_ref, task, self._share).future()
        if self.config.backend == "thread":
            return self._executor.submit(run_trial, self.ctx, task,
                                         storage_prune(self.ctx, task.trial_id, self.study))
        return self._executor.submit(process_trial, task)

    def close(self, cancel: bool = False) -> None:
        if self._ray is not None:
            return  # the Ray instance outlives the study (a later one reuses it)
        self._executor.shutdown(wait=not cancel, cancel_futures=cancel)


def run_study(config: TuneConfig, ctx: TrialContext, space: SearchSpace, source: dict[str, Any],
              resume: bool = False,
              on_trial: Callable[[TrialOutcome, Any], None] | None = None) -> dict[str, Any]:
    """Run the study to `config.trials` trials and write its directory; returns study.json's
    document. `source` names the data (symbol, bars, ...) for the study's record."""
    root = Path(ctx.root)
    root.mkdir(parents=True, exist_ok=True)
    study = open_study(config, space, identity(config, ctx, space, source), resume)
    ctx = replace(ctx, storage_url=config.storage, study_name=config.name, pruner=config.pruner)
    (root / "space.toml").write_text(space.text)
    remaining = config.trials - len(counted_trials(study))
    began = time.perf_counter()
    pending: dict[Future, Any] = {}
    pool = _Pool(config, ctx, study) if remaining > 0 else None
    submitted, ran = 0, 0
    try:
        while submitted < remaining or pending:
            while submitted < remaining and len(pending) < config.parallel:
                trial = study.ask()  # define-by-run: the kind first, then its parameters
                task = TrialTask(trial.number, trial._trial_id, space.suggest(trial))
                pending[pool.submit(task)] = trial
                submitted += 1
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: pending[f].number):
                trial = pending.pop(future)
                outcome = _outcome(future, trial.number)
                record(study, trial, outcome, root)
                ran += 1
                write_summary(study, root, config, source, space, throughput=None)
                if on_trial is not None:
                    on_trial(outcome, study)
    except BaseException:
        if pool is not None:
            pool.close(cancel=True)
        raise
    if pool is not None:
        pool.close()
    wall = time.perf_counter() - began
    throughput = {"backend": config.backend, "parallel": config.parallel, "trials": ran,
                  "wall_s": round(wall, 3),
                  "trials_per_hour": round(ran / wall * 3600, 2) if ran and wall > 0 else None}
    doc = write_summary(study, root, config, source, space, throughput, analyse=True)
    if doc["best"] is not None:
        errors = doc.setdefault("late_errors", [])
        _late(errors, f"writing {BEST_FILE}", lambda: write_best(root, config, ctx, doc),
              lambda line: {})
        if errors:  # study.json says what failed
            write_json(root / STUDY_FILE, doc)
        else:
            del doc["late_errors"]
    return doc


def write_best(root: Path, config: TuneConfig, ctx: TrialContext,
               doc: dict[str, Any]) -> dict[str, Any]:
    """best.toml: the base settings with the best trial's parameters, a config `foxhunt train`
    takes."""
    best = doc["best"]
    kind = f"kind {best['kind']}, " if doc.get("kind_searched") else ""
    header = [(f"foxhunt tune: best of study '{config.name}' (trial {best['number']}, {kind}"
              f"validation {config.metric} {best['value']:.4g})"),
              (f"deflated Sharpe ratio {_fmt(doc['deflated_sharpe'].get('dsr'))}, "
              f"PBO {_fmt(doc['pbo'].get('pbo'))}; GPU profile {ctx.profile.name}"),
              "use: foxhunt --config best.toml train SYMBOL --bars BARS"]
    write_toml(root / BEST_FILE, best_config(ctx.base, ctx.features, best["params"]), header)
    return {}


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _outcome(future: Future, number: int) -> TrialOutcome:
    """The worker's outcome; a worker that died (killed process, lost Ray node) fails the
    trial with the reason."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 (a dead worker fails its trial, not the study)
        return TrialOutcome(number, FAILED, None, 0.0, error=f"worker lost: {type(exc).__name__}: {exc}")


def record(study, trial, outcome: TrialOutcome, root: Path) -> None:
    """Store a finished trial: its returns file, its folds and timing, then its state."""
    from optuna.trial import TrialState

    if outcome.state == COMPLETE:
        path = trial_dir(root, outcome.number) / RETURNS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.tmp.npz")
        np.savez(tmp, bars=outcome.bars, returns=outcome.returns)
        os.replace(tmp, path)
    trial.set_user_attr("seconds", round(outcome.seconds, 3))
    if outcome.folds:
        trial.set_user_attr("folds", outcome.folds)
    if outcome.error:
        trial.set_user_attr("error", outcome.error)
    if outcome.state == COMPLETE and outcome.value is not None and math.isfinite(outcome.value):
        study.tell(trial, outcome.value)
    elif outcome.state == PRUNED:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, state=TrialState.FAIL)


def load_returns(root: Path, number: int) -> tuple[np.ndarray, np.ndarray] | None:
    path = trial_dir(root, number) / RETURNS_FILE
    if not path.is_file():
        return None
    with np.load(path) as f:
        return f["bars"], f["returns"]


# -- the study's record ------------------------------------------------------------------------


def trial_rows(study, space: SearchSpace | None = None) -> list[dict[str, Any]]:
    """study.json's trial table; `kind` is the learner a trial trained (its `agent.kind`, else
    the space's one kind)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        folds = t.user_attrs.get("folds", [])
        rows.append({
            "number": t.number, "state": t.state.name.lower(),
            "value": t.value if t.value is not None and math.isfinite(t.value) else None,
            "kind": space.kind_of(t.params) if space is not None else
            t.params.get(KIND_KEY, "dqn"),
            "params": dict(t.params), "seconds": t.user_attrs.get("seconds"),
            "interrupted": bool(t.system_attrs.get(INTERRUPTED_ATTR)),
            "error": t.user_attrs.get("error"),
            "pso": ({"gen": t.system_attrs["pso:gen"], "particle": t.system_attrs["pso:particle"]}
                    if "pso:gen" in t.system_attrs else None),
            "folds": [{"fold": f["fold"], "best_epoch": f["best_epoch"],
                       **{k: f["val"].get(k) for k in ("sharpe", "psr", "return", "trades",
                                                       "flat")}} for f in folds],
        })
    return rows


def kind_table(rows: list[dict[str, Any]], kinds: list[str] | tuple[str, ...],
               best: dict[str, Any] | None) -> dict[str, Any]:
    """Per learner kind: its trials (interrupted ones not counted, as in the DSR's N), how many
    completed, were pruned or failed, its best and median score over the completed ones and
    its best trial; and the kind of the study's best trial (`kind_won`, None before any trial
    completes). All kinds are scored by the same objective, so their figures compare."""
    table = []
    for kind in [*kinds, *sorted({r["kind"] for r in rows} - set(kinds))]:
        mine = [r for r in rows if r["kind"] == kind and not r.get("interrupted")]
        done = [r for r in mine if r["state"] == "complete" and r["value"] is not None]
        top = max(done, key=lambda r: r["value"]) if done else None
        table.append({
            "kind": kind, "trials": len(mine), "completed": len(done),
            "pruned": sum(r["state"] == "pruned" for r in mine),
            "failed": sum(r["state"] == "fail" for r in mine),
            "best": None if top is None else top["value"],
            "median": float(np.median([r["value"] for r in done])) if done else None,
            "best_trial": None if top is None else top["number"]})
    won = None
    if best is not None:
        won = next((r["kind"] for r in rows if r["number"] == best["number"]), None)
    return {"by_kind": table, "kind_won": won}


def selection_stats(study, root: Path) -> dict[str, Any]:
    """DSR of the best trial and PBO over the finished trials, from their validation returns."""
    from optuna.trial import TrialState

    counted = counted_trials(study)
    done = [t for t in counted if t.state == TrialState.COMPLETE]
    series = {t.number: s for t in done if (s := load_returns(root, t.number)) is not None}
    out: dict[str, Any] = {"deflated_sharpe": {"dsr": None, "reason": "no finished trial"},
                           "pbo": {"pbo": None, "reason": "needs 2 finished trials"}}
    if not series:
        return out
    best = max((t for t in done if t.number in series), key=lambda t: t.value)
    sharpes = np.array([_per_bar_sharpe(r) for _, r in series.values()])
    dsr = deflated_sharpe_of(series[best.number][1], sharpes, n_trials=len(counted))
    out["deflated_sharpe"] = ({**dsr.doc(), "trial": best.number} if dsr is not None else
                              {"dsr": None, "reason": "the best trial's returns are constant "
                                                     "(flat on every validation bar)"})
    out["per_bar_sharpe"] = {n: float(s) for n, s in zip(series, sharpes)}
    if len(series) >= 2:
        matrix = aligned_returns(list(series.values()))
        blocks = min(PBO_BLOCKS, (matrix.shape[0] // 2) // 2 * 2)
        if blocks >= 2:
            out["pbo"] = probability_of_overfitting(matrix, blocks).doc()
        else:
            out["pbo"] = {"pbo": None, "reason": f"{matrix.shape[0]} validation bars common "
                                                 "to the trials: too few to split"}
    return out


def _per_bar_sharpe(returns: np.ndarray) -> float:
    r = np.asarray(returns, dtype=np.float64)
    if r.size < 2 or r.max() == r.min():
        return 0.0
    return float(r.mean() / r.std(ddof=1))


def aligned_returns(series: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """[T, N]: the trials' returns on the decision bars all of them were judged on (trials
    whose observation window differs start their validation at different bars)."""
    common = series[0][0]
    for bars, _ in series[1:]:
        common = np.intersect1d(common, bars)
    cols = []
    for bars, returns in series:
        order = np.argsort(bars, kind="stable")
        cols.append(returns[order][np.searchsorted(bars[order], common)])
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


IMPORTANCE_METHODS = {"fanova": "fANOVA", "ped-anova": "PED-ANOVA"}
NEEDS_SKLEARN = "fANOVA needs scikit-learn: pip install scikit-learn"


def importance(study) -> dict[str, float]:
    """Importance of each parameter for the score (empty below 2 distinct scores); see
    `importance_of`."""
    return importance_of(study)["importance"]


def importance_of(study) -> dict[str, Any]:
    """Parameter importance for study.json: `importance` (key -> share, summing to 1),
    `importance_method` (fanova, ped-anova or None) and `importance_note` (why it is empty, or
    why not fANOVA). fANOVA where scikit-learn is installed (the `tune` extra does not bring
    it); else Optuna's PED-ANOVA, which needs nothing beyond Optuna."""
    from optuna.trial import TrialState

    values = {t.value for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
    if len(values) < 2:
        return {"importance": {}, "importance_method": None,
                "importance_note": "needs 2 finished trials with different scores"}
    import warnings

    import optuna

    note = None
    try:
        import sklearn  # noqa: F401  (fANOVA's random forest)

        method, evaluator = "fanova", optuna.importance.FanovaImportanceEvaluator(seed=0)
    except ImportError:
        ped_anova = getattr(optuna.importance, "PedAnovaImportanceEvaluator", None)
        if ped_anova is None:
            return {"importance": {}, "importance_method": None,
                    "importance_note": NEEDS_SKLEARN.replace("fANOVA needs", "needs")}
        method, evaluator, note = "ped-anova", ped_anova(), NEEDS_SKLEARN
    try:
        with warnings.catch_warnings():  # PED-ANOVA is experimental in some Optuna releases
            warnings.simplefilter("ignore")
            shares = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (RuntimeError, ValueError) as exc:
        return {"importance": {}, "importance_method": None,
                "importance_note": f"{IMPORTANCE_METHODS[method]}: {one_line(exc)}"}
    return {"importance": {k: float(v) for k, v in shares.items()}, "importance_method": method,
            "importance_note": note}


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message's first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _late(errors: list[str], step: str, compute: Callable[[], dict[str, Any]],
          fallback: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """A step run after the trials: its failure is one line in `errors` and its fallback
    values, never the loss of the study's result."""
    try:
        return compute()
    except Exception as exc:  # noqa: BLE001 (any failure here must not lose the trials' result)
        line = f"{step}: {one_line(exc)}"
        errors.append(line)
        return fallback(line)


def write_summary(study, root: Path, config: TuneConfig, source: dict[str, Any],
                  space: SearchSpace, throughput: dict[str, Any] | None,
                  analyse: bool = False) -> dict[str, Any]:
    """study.json, rewritten atomically after every trial (the report reads it mid-study);
    with `analyse` also DSR, PBO and parameter importance."""
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    best = max(done, key=lambda t: t.value) if done else None
    path = root / STUDY_FILE
    old = json.loads(path.read_text()) if path.is_file() else {}
    doc: dict[str, Any] = {
        "study": config.name, "storage": safe_url(config.storage), **source,
        "sampler": config.sampler, "metric": config.metric, "pruner": config.pruner,
        "direction": "maximize", "trials_requested": config.trials,
        "space": space.describe(), "space_keys": space.keys(),
        "kinds": list(space.kinds), "kind_searched": space.searches_kind,
        "kind_keys": {k: [p.key for p in space.own.get(k, ())] for k in space.kinds},
        "trials": trial_rows(study, space),
        "best": None if best is None else {"number": best.number, "value": best.value,
                                           "kind": space.kind_of(best.params),
                                           "params": dict(best.params), "config": BEST_FILE},
        "throughput": throughput or old.get("throughput"),
        "final": old.get("final"),
    }
    doc.update(kind_table(doc["trials"], space.kinds, doc["best"]))
    if analyse:
        errors: list[str] = []
        doc.update(_late(errors, "DSR and PBO", lambda: selection_stats(study, root),
                         lambda line: {"deflated_sharpe": {"dsr": None, "reason": f"failed ({line})"},
                                       "pbo": {"pbo": None, "reason": f"failed ({line})"}}))
        doc.update(_late(errors, "parameter importance", lambda: importance_of(study),
                         lambda line: {"importance": {}, "importance_method": None,
                                       "importance_note": f"failed ({line})"}))
        if errors:
            doc["late_errors"] = errors
    else:
        for key in ("deflated_sharpe", "pbo", "importance", "importance_method",
                    "importance_note", "per_bar_sharpe"):
            if key in old:
                doc[key] = old[key]
        doc.setdefault("deflated_sharpe", {"dsr": None, "reason": "computed when the study ends"})
        doc.setdefault("pbo", {"pbo": None, "reason": "computed when the study ends"})
    write_json(path, doc)
    return doc


def write_json(path: Path, doc: Any) -> None:
    write_text_atomic(json.dumps(doc, indent=2, default=_plain), path)


def _plain(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_study(root: Path) -> dict[str, Any]:
    path = Path(root) / STUDY_FILE
    if not path.is_file():
        raise FoxhuntError(f"{root}: not a foxhunt study (no {STUDY_FILE}); run `foxhunt tune` first")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FoxhuntError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


# -- the test windows, once --------------------------------------------------------------------


def run_final(ctx: TrialContext, params: dict[str, Any], run_dir: Path,
              on_epoch: Callable[[dict[str, Any]], None] | None = None,
              on_fold: Callable[[Any], None] | None = None) -> RunResult:
    """The chosen configuration trained again as a normal walk-forward run (scope `test`): the
    only time the study's test windows are rolled out. Records its fold table in study.json."""
    from foxhunt.devices import resolve_device
    from foxhunt.features.pipeline import FeaturePipeline

    spec = apply(ctx.base, params, "best trial").sized_for(ctx.profile)
    trainer = WalkForwardTrainer(spec, ctx.bars, FeaturePipeline(ctx.features, ctx.instrument.session),
                                 ctx.instrument, run_dir, resolve_device(ctx.device), on_epoch,
                                 ctx.periods_per_year, on_fold)
    result = trainer.run()
    path = Path(ctx.root) / STUDY_FILE
    if path.is_file():
        doc = json.loads(path.read_text())
        doc["final"] = {"run_dir": str(run_dir), "folds": result.table()}
        write_json(path, doc)
    return result


__all__ = ["BACKENDS", "METRICS", "SAMPLERS", "TuneConfig", "run_final", "run_study"]

"""Every extra carries its commands (issue 34, point 8).

Per extra of pyproject.toml's [project.optional-dependencies] that a user installs for a command
(`tune`, `ray`, `postgres`) and for the base install, a virtualenv holding foxhunt's wheel with
that extra and nothing more, where the commands the extra is for run end to end as a user runs
them: `foxhunt data sample`, `train`, `backtest` (base); `foxhunt tune` (tune); `foxhunt tune
--backend ray` (ray); `foxhunt paper --log postgresql+psycopg://...` (postgres). The suite's own
environment holds every extra at once (the test extra), so a package that only another extra
brings (scikit-learn, which Optuna's fANOVA importance needs, came with the bench extra) hid a
crash at the end of `foxhunt tune` from every other test.

Fast enough for CI without reinstalling torch (~700 MB) per venv: a session-wide *base layer*,
a folder of symlinks to exactly the closure of foxhunt's base requirements (read with
importlib.metadata from the environment running the tests, markers evaluated, no extra), which
each venv sees through a `.pth` file. pip counts what the layer holds as installed, so
`pip install foxhunt-*.whl[EXTRA]` adds only what the extra brings. Nothing outside the closure
is linked: a package only another extra brings is absent, which each test asserts. The wheel is
built once, from a copy of the sources (no build/ or egg-info in the working tree).

Skips, saying why, where pip cannot reach a package index (the extras are installed from it) or
where the running environment lacks a base requirement to link.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_trading import OPEN_LIMITS
from tests.tune.test_cli_tune import SPACE

ROOT = Path(__file__).resolve().parents[2]
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
# the base interpreter, not the test venv's: a venv made from a venv's python would still be
# a plain venv, but this says what is meant
BASE_PYTHON = getattr(sys, "_base_executable", None) or sys.executable

# A training config small enough for seconds a run on a loaded 2-core CPU (one fold, 4 updates).
MINI = """
[env]
window = 4
episode_len = 32
[agent]
hidden = 16
atoms = 11
[replay]
capacity = 1024
beta_anneal_steps = 50
[train]
epochs = 1
updates_per_fold = 4
replay_ratio = 2.5
learning_starts = 64
batch_size = 16
n_envs = 8
device = "cpu"
[walkforward]
folds = 1
purge = 8
"""
# What only some extra brings: absent from a venv whose extra does not bring it.
ONLY_EXTRAS = {"optuna": "tune, ray", "cmaes": "tune", "ray": "ray", "psycopg": "postgres",
               "sklearn": "no extra of foxhunt's commands"}


# -- the shared pieces: an index probe, the base layer, the wheel -------------------------------


def _pip(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _tail(text: str, n: int = 1500) -> str:
    return text[-n:].strip()


def base_closure() -> dict[str, object]:
    """name -> Distribution: foxhunt's base requirements and theirs, in this environment."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, object] = {}
    todo = [(r, "") for r in metadata.distribution("foxhunt").requires or []]
    while todo:
        text, extra = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if name in found and not req.extras:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise LookupError(f"{req.name} (a base requirement of foxhunt) is not installed in "
                              f"{sys.prefix}") from None
        if name not in found:
            found[name] = dist
            todo += [(r, "") for r in dist.requires or []]
        for e in req.extras:
            todo += [(r, e) for r in dist.requires or []]
    return found


def link_layer(layer: Path) -> list[str]:
    """Symlink every top-level entry (packages, modules, .libs, dist-info) of the base closure
    into `layer`; returns the distributions' names."""
    layer.mkdir(parents=True)
    dists = base_closure()
    for dist in dists.values():
        if not dist.files:
            raise LookupError(f"{dist.metadata['Name']} has no RECORD to link it by")
        for top in sorted({f.parts[0] for f in dist.files}):
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            src, dst = Path(dist.locate_file(top)), layer / top
            if src.exists() and not dst.exists():
                dst.symlink_to(src)
    return sorted(dists)


def build_wheel(work: Path) -> Path:
    """foxhunt's wheel, built from a copy of the sources (the working tree stays untouched)."""
    src = work / "source"
    shutil.copytree(ROOT / "src", src / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, src / name)
    # without a recent enough setuptools here, pip fetches one into an isolated build env
    no_iso = ["--no-build-isolation"] if _has_build_backend() else []
    proc = _pip("wheel", "-q", "--no-deps", *no_iso, "-w", str(work / "wheels"), str(src))
    if proc.returncode != 0:
        raise RuntimeError(f"building foxhunt's wheel failed: {_tail(proc.stderr)}")
    return next((work / "wheels").glob("foxhunt-*.whl"))


def _has_build_backend() -> bool:
    from importlib import metadata

    from packaging.version import Version

    try:  # setuptools builds wheels itself since 70.1: the `wheel` package is not needed
        return Version(metadata.version("setuptools")) >= Version("77")
    except metadata.PackageNotFoundError:
        return False


def prepare(work: Path) -> dict[str, str]:
    """{"skip": why} or {"layer": ..., "wheel": ...}."""
    probe = _pip("download", "-q", "--no-deps", "-d", str(work / "probe"), "cmaes", timeout=120)
    if probe.returncode != 0:
        return {"skip": "pip cannot reach a package index to install the extras from "
                        f"(pip download cmaes: "
                        f"{(probe.stderr.strip().splitlines() or ['no output'])[-1]})"}
    try:
        names = link_layer(work / "base-layer")
    except LookupError as exc:
        return {"skip": f"cannot build the base layer: {exc}"}
    return {"layer": str(work / "base-layer"), "wheel": str(build_wheel(work)),
            "base": ", ".join(names)}


@pytest.fixture(scope="session")
def shared(tmp_path_factory) -> dict[str, str]:
    """Built once per session, shared by xdist's workers (under a file lock)."""
    from filelock import FileLock  # torch's requirement: always here

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    work = tmp_path_factory.getbasetemp()
    if worker is not None:
        work = work.parent
    work = work / "extras-shared"
    done = work.with_suffix(".json")
    with FileLock(str(work) + ".lock"):
        if not done.is_file():
            if work.exists():
                shutil.rmtree(work)
            work.mkdir(parents=True)
            done.write_text(json.dumps(prepare(work)))
    doc = json.loads(done.read_text())
    if "skip" in doc:
        pytest.skip(doc["skip"])
    return doc


# -- a venv per extra ---------------------------------------------------------------------------


class Venv:
    def __init__(self, path: Path, home: Path):
        self.path, self.home = path, home
        self.python = path / "bin" / "python"
        home.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "PYTHONHOME", "FOXHUNT_GPU_PROFILE")}
        self.env.update(PATH=f"{path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                        VIRTUAL_ENV=str(path), FOXHUNT_HOME=str(home), PYTHONNOUSERSITE="1",
                        # one intra-op thread: tiny nets on a shared CPU run several times
                        # faster than with a pool fighting the other tests' processes
                        OMP_NUM_THREADS="1", COLUMNS="160", NO_COLOR="1")

    def run(self, *argv: str, ok: bool = True, timeout: float = 240) -> subprocess.CompletedProcess:
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=self.home,
                              timeout=timeout, check=False)
        if ok:
            assert proc.returncode == 0, (f"{' '.join(argv)} failed ({proc.returncode}) in "
                                          f"{self.path}:\n{_tail(proc.stdout)}\n{_tail(proc.stderr)}")
        return proc

    def foxhunt(self, *args: str, ok: bool = True, timeout: float = 240):
        return self.run(str(self.path / "bin" / "foxhunt"), *args, ok=ok, timeout=timeout)

    def importable(self, *modules: str) -> dict[str, bool]:
        code = ("import importlib.util, json, sys; print(json.dumps({m: importlib.util.find_spec(m)"
                " is not None for m in sys.argv[1:]}))")
        return json.loads(self.run(str(self.python), "-c", code, *modules).stdout)


def make_venv(shared: dict[str, str], tmp: Path, extra: str | None) -> Venv:
    path = tmp / f"venv-{extra or 'base'}"
    subprocess.run([BASE_PYTHON, "-m", "venv", "--without-pip", str(path)], check=True,
                   capture_output=True, timeout=120)
    site = path / "lib" / PY / "site-packages"
    (site / "foxhunt_base_layer.pth").write_text(shared["layer"] + "\n")
    spec = shared["wheel"] + (f"[{extra}]" if extra else "")
    proc = _pip("--python", str(path / "bin" / "python"), "install", "-q", "--no-input",
                # no .pyc for every file of ray & co. now: Python writes those it imports
                "--no-compile", spec,
                timeout=400)
    assert proc.returncode == 0, f"pip install {spec} failed:\n{_tail(proc.stderr)}"
    return Venv(path, tmp / "home")


def assert_isolated(venv: Venv, brings: set[str]) -> None:
    """What the venv's extra brings is there; what only other extras bring is not."""
    seen = venv.importable(*ONLY_EXTRAS)
    for module, extras in ONLY_EXTRAS.items():
        assert seen[module] == (module in brings), (
            f"{module} ({extras}) is {'' if seen[module] else 'not '}importable in {venv.path}")


def _files(tmp: Path) -> tuple[str, str]:
    (tmp / "mini.toml").write_text(MINI)
    (tmp / "space.toml").write_text(SPACE)
    return str(tmp / "mini.toml"), str(tmp / "space.toml")


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- the commands each extra is for -------------------------------------------------------------


def test_the_base_install_runs_data_train_and_backtest(shared, tmp_path):
    began = time.perf_counter()
    venv = make_venv(shared, tmp_path, None)
    assert_isolated(venv, set())
    mini, space = _files(tmp_path)
    venv.foxhunt("data", "sample")
    trained = venv.foxhunt("--config", mini, "train", "ES", "--json")
    assert json.loads(trained.stdout)["kind"] == "train.run"
    tested = venv.foxhunt("backtest", "ES", "--strategy", "buy-and-hold")
    assert "buy-and-hold" in tested.stdout
    # the commands of an extra that is not installed say which extra, in one line
    line = _one_line_error(venv.foxhunt("tune", "ES", "--space", space, "--trials", "1",
                                        ok=False))
    assert "pip install 'foxhunt[tune]'" in line
    print(f"base: {time.perf_counter() - began:.1f} s")


def test_the_tune_extra_runs_a_study_to_its_result(shared, tmp_path):
    began = time.perf_counter()
    venv = make_venv(shared, tmp_path, "tune")
    assert_isolated(venv, {"optuna", "cmaes"})  # sklearn absent: what the user had
    mini, space = _files(tmp_path)
    venv.foxhunt("data", "sample")
    # the user's command, small: the default sampler (pso) and backend (process), the final
    # test rollout, 2 trials (importance needs 2 distinct scores)
    tuned = venv.foxhunt("--config", mini, "tune", "ES", "--space", space, "--trials", "2",
                         "--particles", "2")
    study_dir = venv.home / "studies" / "ES-1min-pso"
    assert "Traceback" not in tuned.stderr, tuned.stderr
    assert "deflated Sharpe ratio" in tuned.stdout and "probability of backtest" in tuned.stdout
    assert f"best configuration: {study_dir / 'best.toml'}" in tuned.stdout.replace("\n", "")
    assert (study_dir / "best.toml").is_file()
    doc = json.loads((study_dir / "study.json").read_text())
    assert doc["best"] is not None and doc["final"] is not None
    # importance itself, on a study with distinct scores (the trials above may tie)
    check = textwrap.dedent("""
        import json, optuna
        from foxhunt.tune.study import importance
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        study = optuna.create_study(direction="maximize",
                                    sampler=optuna.samplers.RandomSampler(seed=0))
        study.optimize(lambda t: t.suggest_float("a", 0, 1) + 0.1 * t.suggest_int("b", 1, 4),
                       n_trials=12)
        print(json.dumps(importance(study)))
    """)
    imp = json.loads(venv.run(str(venv.python), "-c", check).stdout.strip().splitlines()[-1])
    assert isinstance(imp, dict)
    # --backend ray without the ray extra: one line naming it
    line = _one_line_error(venv.foxhunt("--config", mini, "tune", "ES", "--space", space,
                                        "--trials", "1", "--study", "r", "--backend", "ray",
                                        "--no-final", ok=False))
    assert "pip install 'foxhunt[ray]'" in line
    print(f"tune: {time.perf_counter() - began:.1f} s")


def test_the_ray_extra_runs_a_study_on_ray(shared, tmp_path):
    began = time.perf_counter()
    venv = make_venv(shared, tmp_path, "ray")
    assert_isolated(venv, {"optuna", "ray"})
    mini, space = _files(tmp_path)
    venv.foxhunt("data", "sample")
    tuned = venv.foxhunt("--config", mini, "tune", "ES", "--space", space, "--trials", "1",
                         "--backend", "ray", "--sampler", "random", "--no-final", "--json",
                         timeout=300)
    doc = json.loads(tuned.stdout)
    assert doc["throughput"]["backend"] == "ray" and len(doc["trials"]) == 1
    assert doc["trials"][0]["state"] == "complete", doc["trials"][0]
    print(f"ray: {time.perf_counter() - began:.1f} s")


def test_the_postgres_extra_paper_trades_on_a_postgresql_log(shared, tmp_path):
    from tests.pg import PostgresServer, find_bin_dir

    began = time.perf_counter()
    venv = make_venv(shared, tmp_path, "postgres")
    assert_isolated(venv, {"psycopg"})
    (tmp_path / "risk.toml").write_text(OPEN_LIMITS)
    venv.foxhunt("data", "sample")
    paper = ("paper", "ES", "--bars", "1min", "--strategy", "sma:10,30", "--risk",
             str(tmp_path / "risk.toml"), "--json")
    if find_bin_dir() is None:
        venv.run(str(venv.python), "-c", "import psycopg")
        doc = json.loads(venv.foxhunt(*paper, "--log", f"sqlite:///{tmp_path / 'l.db'}").stdout)
        assert doc["orders"] > 0
        pytest.skip("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or "
                    "on PATH): checked the driver imports and a paper run on SQLite only")
    with PostgresServer(fsync=False) as pg:
        url = pg.url()
        doc = json.loads(venv.foxhunt(*paper, "--account", "pg", "--log", url).stdout)
        assert doc["log"] == url and doc["orders"] > 0
        orders = json.loads(venv.foxhunt("orders", "--account", "pg", "--log", url, "--last", "0",
                                         "--json").stdout)["orders"]
        assert len(orders) == doc["orders"]
    print(f"postgres: {time.perf_counter() - began:.1f} s")

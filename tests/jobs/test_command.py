"""What a job's attempt runs: a retried attempt resumes only where the run it continues had
started, and a refused choice of --resume is reversed once (never a user's own --resume)."""

from __future__ import annotations

import time

import pytest

from foxhunt.jobs.command import JobCommand
from foxhunt.jobs.model import Job, JobKind, JobState
from foxhunt.paper.account_files import AccountFiles


def job(kind: str, args: list[str], attempts: int) -> Job:
    return Job(id=7, kind=JobKind(kind), args=args, state=JobState.RUNNING, submitted_by="t",
               submitted_at=time.time(), attempts=attempts)


def test_a_train_job_writes_one_run_directory_and_a_retry_resumes_it(tmp_path):
    first = JobCommand.of(job("train", ["SYN"], 1), tmp_path)
    out = tmp_path / "runs" / "jobs" / "job-7"
    assert first.args == ["train", "SYN", "--out", str(out), "--json"] and first.out_dir == out
    again = JobCommand.of(job("train", ["SYN"], 2), tmp_path)
    assert again.args == ["train", "SYN", "--out", str(out), "--resume", "--json"]
    named = JobCommand.of(job("train", ["SYN", "--out", "es"], 2), tmp_path)
    assert named.out_dir == tmp_path / "runs" / "es"


def test_a_tune_retry_resumes_only_a_study_that_wrote_its_space(tmp_path):
    out = tmp_path / "studies" / "jobs" / "job-7"
    assert "--resume" not in JobCommand.of(job("tune", ["SYN"], 2), tmp_path).args
    out.mkdir(parents=True)
    (out / "space.toml").write_text("")
    assert "--resume" in JobCommand.of(job("tune", ["SYN"], 2), tmp_path).args
    assert "--resume" not in JobCommand.of(job("tune", ["SYN"], 1), tmp_path).args


@pytest.mark.parametrize("args, account, log", [
    (["SYN", "--strategy", "sma:10,30"], "paper", None),
    (["SYN", "--account", "ann", "--strategy", "sma:10,30"], "ann", None),
    (["SYN", "--account=ann", "--log", "sqlite:////x/ann.sqlite"], "ann", "sqlite:////x/ann.sqlite"),
])
def test_a_paper_retry_resumes_only_an_account_whose_run_started(tmp_path, args, account, log):
    assert "--resume" not in JobCommand.of(job("paper", args, 2), tmp_path).args
    files = AccountFiles.of(tmp_path, account, log)
    files.folder.mkdir(parents=True)
    files.write_meta({"symbol": "SYN"})
    assert JobCommand.of(job("paper", args, 2), tmp_path).args[-2:] == ["--resume", "--json"]
    assert "--resume" not in JobCommand.of(job("paper", args, 1), tmp_path).args


@pytest.fixture
def tune_refusals(tmp_path) -> dict[str, str]:
    """`foxhunt tune`'s own words for a study it will not start afresh, and for one it cannot
    resume."""
    pytest.importorskip("optuna")
    from foxhunt.errors import ConfigError
    from foxhunt.tune.space import load_space
    from foxhunt.tune.study import TuneConfig, open_study

    config = TuneConfig(name="s", storage=f"sqlite:///{tmp_path / 'studies.db'}", trials=1,
                        sampler="random")
    space = load_space()
    with pytest.raises(ConfigError) as missing:
        open_study(config, space, {}, resume=True)
    open_study(config, space, {}, resume=False)
    with pytest.raises(ConfigError) as exists:
        open_study(config, space, {}, resume=False)
    return {"exists": str(exists.value), "missing": str(missing.value)}


def test_a_refused_resume_choice_is_reversed_once_on_a_retry(tmp_path, tune_refusals):
    study = tmp_path / "studies" / "jobs" / "job-7"
    fresh = JobCommand.of(job("tune", ["SYN"], 2), tmp_path)  # created, space.toml not yet
    resumed = fresh.fallback(tune_refusals["exists"])
    assert resumed is not None and resumed.args[-1] == "--resume" and resumed.added_resume
    assert resumed.fallback(tune_refusals["exists"]) is None
    study.mkdir(parents=True)
    (study / "space.toml").write_text("")
    chosen = JobCommand.of(job("tune", ["SYN"], 2), tmp_path)
    afresh = chosen.fallback(tune_refusals["missing"])
    assert afresh is not None and "--resume" not in afresh.args and not afresh.added_resume
    assert afresh.fallback(tune_refusals["missing"]) is None


def test_a_first_attempt_or_a_users_resume_is_never_reversed(tmp_path, tune_refusals):
    assert JobCommand.of(job("tune", ["SYN"], 1), tmp_path).fallback(
        tune_refusals["exists"]) is None
    users = JobCommand.of(job("tune", ["SYN", "--resume"], 2), tmp_path)
    assert users.fallback(tune_refusals["missing"]) is None
    assert JobCommand.of(job("train", ["SYN"], 2), tmp_path).fallback(
        "the study diverged") is None

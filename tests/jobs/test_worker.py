"""Workers: a job killed with its worker is resumed by another and ends as an uninterrupted run
would; a cancelled job's child stops within seconds; jobs run as Ray tasks too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from foxhunt import schemas
from foxhunt.jobs import JobState, JobStore
from foxhunt.jobs.child import Outcome
from foxhunt.jobs.worker import Worker, WorkerConfig

from ..cli.test_cli import run, run_json
from .fakes import Recording, Scripted

TRAIN = ["SYN", "--bars", "1min", "--seed", "1"]
LEASE_S = 1


def foxhunt(*argv: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "foxhunt", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def wait_for(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by its reaper) is dead
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def without_paths(folds: list[dict]) -> list[dict]:
    return [{k: v for k, v in f.items() if k != "checkpoint"} for f in folds]


def lines(path: Path) -> int:
    try:
        return sum(1 for ln in path.read_text().splitlines() if ln.strip())
    except OSError:
        return 0


@pytest.fixture
def one_thread():
    """This process's torch on one thread, as the children (`market`), for the reference run."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_job_killed_with_its_worker_is_resumed_by_another_and_ends_as_if_uninterrupted(
        capsys, market, tmp_path, one_thread):
    db = f"sqlite:///{tmp_path / 'foxhunt.db'}"
    store = JobStore.open(db)
    out_dir = tmp_path / "killed"
    job = store.submit("train", [*TRAIN, "--out", str(out_dir)])
    first = foxhunt("worker", "--db", db, "--lease", str(LEASE_S), "--once")
    child = wait_for(lambda: store.get(job.id).progress.get("pid"), 60, "the job's child")
    wait_for(lambda: lines(out_dir / "run.jsonl"), 60, "the first epoch")
    first.kill()  # SIGKILL: no clean-up of its own
    first.wait(10)
    cut = store.get(job.id)
    assert cut.state is JobState.RUNNING and cut.attempts == 1  # its lease running out
    assert not (out_dir / "folds.json").exists()  # cut off mid-run
    wait_for(lambda: not alive(child), 10, "the child to die with its worker")

    second = foxhunt("worker", "--db", db, "--lease", str(LEASE_S), "--max-jobs", "1")
    # meanwhile, here: the same training uninterrupted
    expected = run_json(capsys, "train", *TRAIN, "--out", str(tmp_path / "reference"))
    assert second.wait(120) == 0, second.stderr.read()
    done = store.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.attempts == 2, done.error
    assert without_paths(done.result["folds"]) == without_paths(expected["folds"])
    assert without_paths(json.loads((out_dir / "folds.json").read_text())) == without_paths(
        json.loads((tmp_path / "reference" / "folds.json").read_text()))
    assert done.progress["phase"] == "done" and done.progress["fraction"] == 1.0


def in_thread(store: JobStore, home: Path, executor=None) -> tuple[Worker, threading.Thread]:
    worker = Worker(store, WorkerConfig(home=home, once=True, lease_s=10), executor)
    result: list = []
    thread = threading.Thread(target=lambda: result.extend(worker.run()), daemon=True)
    thread.start()
    thread.result = result
    return worker, thread


def test_cancelling_a_running_job_stops_its_child_within_seconds(market, tmp_path):
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    job = store.submit("train", [*TRAIN, "--epochs", "50"])
    _, thread = in_thread(store, market)
    child = wait_for(lambda: store.get(job.id).progress.get("pid"), 60, "the job's child")
    store.cancel(job.id)
    began = time.monotonic()
    wait_for(lambda: not alive(child), 10, "the child to stop")
    assert time.monotonic() - began < 4
    thread.join(10)
    assert not thread.is_alive()
    assert store.get(job.id).state is JobState.CANCELLED


def test_a_failing_job_keeps_its_error_line_and_the_worker_goes_on(market, tmp_path):
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    bad = store.submit("backtest", ["NOPE", "--strategy", "sma:10,30", "--device", "cpu"])
    good = store.submit("backtest", ["SYN", "--strategy", "sma:10,30", "--device", "cpu"])
    _, thread = in_thread(store, market)
    thread.join(60)
    failed, succeeded = store.get(bad.id), store.get(good.id)
    assert failed.state is JobState.FAILED and "NOPE" in failed.error
    assert "\n" not in failed.error and not failed.error.startswith("error:")
    assert succeeded.state is JobState.SUCCEEDED and succeeded.result["kind"] == "backtest"
    assert [j.id for j in thread.result] == [bad.id, good.id]


def cut_off(store: JobStore, job_id: int) -> None:
    """`job_id`'s first attempt, as a worker killed at once leaves it: claimed, its lease out."""
    claimed = store.claim("killed", lease_s=0.01)
    assert claimed is not None and claimed.id == job_id and claimed.attempts == 1
    time.sleep(0.05)


def test_a_paper_job_cut_off_before_its_account_started_starts_afresh(market, tmp_path):
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    job = store.submit("paper", ["SYN", "--strategy", "sma:10,30", "--account", "cut"])
    cut_off(store, job.id)
    executor = Recording()
    _, thread = in_thread(store, market, executor)
    thread.join(60)
    done = store.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.attempts == 2, done.error
    assert done.result["kind"] == "paper" and done.result["account"] == "cut"
    assert done.result["resumed_from"] is None
    assert [("--resume" in args) for args in executor.ran] == [False]  # afresh, at once


def test_a_retry_whose_study_was_created_unseen_is_resumed_after_tune_refuses(tmp_path):
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    job = store.submit("tune", ["SYN", "--trials", "4"])
    cut_off(store, job.id)  # it had created the study, not yet its space.toml
    refusal = ("error: study 'SYN-1min-pso' already exists in sqlite:///x.db; continue it with "
               "--resume or name a new one with --study NAME")
    executor = Scripted(Outcome(1, "", [refusal]), Outcome(0, '{"kind": "tune"}\n', []))
    _, thread = in_thread(store, tmp_path, executor)
    thread.join(10)
    done = store.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.result == {"kind": "tune"}, done.error
    assert [("--resume" in args) for args in executor.ran] == [False, True]


def test_jobs_run_as_ray_tasks(market, tmp_path):
    ray = pytest.importorskip("ray")
    from foxhunt.jobs.ray_exec import RayExecutor

    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    job = store.submit("backtest", ["SYN", "--strategy", "sma:10,30", "--device", "cpu"])
    try:
        _, thread = in_thread(store, market, RayExecutor("local", num_cpus=1))
        thread.join(90)
    finally:
        ray.shutdown()
    done = store.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.result["kind"] == "backtest", done.error


def submitted(capsys, *options: str) -> dict:
    """`foxhunt submit OPTIONS --json -- SYN`'s document (after `--`, all is the job's)."""
    code, out, err = run(capsys, "submit", *options, "--json", "--", "SYN")
    assert code == 0, err
    return json.loads(out)


def test_the_cli_submits_lists_shows_and_cancels(capsys, tmp_path):
    db = f"sqlite:///{tmp_path / 'foxhunt.db'}"
    code, out, _ = run(capsys, "submit", "train", "--db", db, "--", "SYN", "--bars", "1min")
    assert code == 0 and out.strip().isdigit()
    job = submitted(capsys, "backtest", "--db", db, "--by", "ann")
    assert (job["kind"], job["job_kind"], job["args"], job["submitted_by"]) == (
        "job", "backtest", ["SYN"], "ann")
    listed = run_json(capsys, "jobs", "--db", db)
    assert [j["id"] for j in listed["jobs"]] == [job["id"], int(out)]
    assert listed["jobs"][1]["args"] == ["SYN", "--bars", "1min"]
    shown = run_json(capsys, "jobs", "show", str(job["id"]), "--db", db)
    assert shown["state"] == "queued"
    cancelled = run_json(capsys, "jobs", "--db", db, "cancel", str(job["id"]))
    assert cancelled["state"] == "cancelled"
    assert [j["id"] for j in run_json(capsys, "jobs", "--db", db, "--state", "queued")["jobs"]] \
        == [int(out)]
    for doc in (job, listed, shown, cancelled):
        schemas.validate(doc)


def test_the_default_database_is_in_foxhunt_home(capsys, isolated_home):
    submitted(capsys, "backtest")
    assert (isolated_home / "foxhunt.db").exists()
    assert len(run_json(capsys, "jobs")["jobs"]) == 1


@pytest.mark.parametrize("argv, needle", [
    (["jobs", "show", "42"], "job 42: no such job"),
    (["jobs", "cancel", "42"], "job 42: no such job"),
    (["submit", "evaluate", "--", "SYN"], "job kind 'evaluate': expected one of train"),
    (["jobs", "--state", "done"], "--state done: expected one of queued"),
    (["worker", "--gpus", "a,b"], "--gpus 'a,b': expected GPU numbers"),
    (["jobs", "--db", "mysql://x/y"], "mysql is not supported"),
    (["jobs", "--db", "postgresql+psycopg://u:pw@127.0.0.1:1/x?connect_timeout=2"],
     "unreachable"),
])
def test_mistakes_are_one_line(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code != 0 and needle in err and err.count("\n") == 1 and "pw" not in err


def test_cancelling_a_finished_job_is_one_line(capsys, tmp_path):
    db = f"sqlite:///{tmp_path / 'foxhunt.db'}"
    job = submitted(capsys, "backtest", "--db", db)
    run(capsys, "jobs", "cancel", str(job["id"]), "--db", db)
    code, _, err = run(capsys, "jobs", "cancel", str(job["id"]), "--db", db)
    assert code == 1 and f"job {job['id']} is cancelled: it cannot become cancelled" in err

"""The jobs table: submitted jobs are queued, claimed once, leased, cancelled, finished; every
move follows the state machine and an illegal one is one clear line."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from foxhunt.jobs import (
    IllegalTransitionError,
    JobError,
    JobKind,
    JobState,
    JobStore,
    UnknownJobError,
)
from foxhunt.jobs.model import TRANSITIONS, check_transition
from foxhunt.jobs.store import MAX_ATTEMPTS


@pytest.fixture
def store(db_url):
    s = JobStore.open(db_url)
    yield s
    s.close()


def test_the_state_machine_allows_only_its_moves():
    allowed = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert allowed == {
        (JobState.QUEUED, JobState.RUNNING), (JobState.QUEUED, JobState.CANCELLED),
        (JobState.RUNNING, JobState.RUNNING), (JobState.RUNNING, JobState.SUCCEEDED),
        (JobState.RUNNING, JobState.FAILED), (JobState.RUNNING, JobState.CANCELLED)}
    for a in JobState:
        for b in JobState:
            if (a, b) in allowed:
                check_transition(1, a, b)
            else:
                with pytest.raises(IllegalTransitionError, match=f"^job 1 is {a}: it cannot become {b}"):
                    check_transition(1, a, b)


def test_a_submitted_job_is_queued_with_its_arguments(store):
    job = store.submit("train", ["SYN", "--bars", "1min", "--json"], submitted_by="ann")
    assert (job.kind, job.state, job.args, job.submitted_by) == (
        JobKind.TRAIN, JobState.QUEUED, ["SYN", "--bars", "1min"], "ann")
    assert job.gpus == 1 and job.attempts == 0 and job.progress == {}
    assert store.submit("backtest", ["SYN"]).gpus == 0
    assert [j.id for j in store.list()] == [job.id + 1, job.id]
    assert [j.id for j in store.list([JobState.QUEUED], limit=1)] == [job.id + 1]


def test_a_claim_leases_the_oldest_job_and_finishing_records_the_result(store):
    first, second = store.submit("backtest", ["A"]), store.submit("backtest", ["B"])
    job = store.claim("w1", lease_s=30)
    assert job.id == first.id and job.state is JobState.RUNNING and job.worker == "w1"
    assert job.attempts == 1 and job.lease_until > job.heartbeat_at
    assert store.heartbeat(job.id, "w1", 30) is JobState.RUNNING
    store.report(job.id, "w1", {"phase": "training", "fraction": 0.5})
    assert store.get(job.id).progress == {"phase": "training", "fraction": 0.5}
    done = store.finish(job.id, "w1", JobState.SUCCEEDED, {"kind": "backtest"})
    assert done.state is JobState.SUCCEEDED and done.result == {"kind": "backtest"}
    assert store.claim("w2", 30).id == second.id
    assert store.claim("w3", 30) is None


def test_a_job_whose_lease_ran_out_is_claimed_again_by_another_worker(store):
    job = store.submit("train", ["SYN"])
    store.claim("dead", lease_s=0.01)
    threading.Event().wait(0.05)
    again = store.claim("alive", lease_s=30)
    assert again.id == job.id and again.worker == "alive" and again.attempts == 2
    # the first worker, come back, learns the job is no longer its own; its finish is ignored
    assert store.heartbeat(job.id, "dead", 30) is JobState.CANCELLED
    assert store.finish(job.id, "dead", JobState.FAILED, error="x").worker == "alive"
    assert store.get(job.id).state is JobState.RUNNING


def test_a_job_whose_worker_died_too_often_fails(store):
    job = store.submit("train", ["SYN"])
    for _ in range(MAX_ATTEMPTS):
        assert store.claim("w", lease_s=0.001).id == job.id
        threading.Event().wait(0.01)
    assert store.claim("w", 30) is None
    failed = store.get(job.id)
    assert failed.state is JobState.FAILED and f"stopped {MAX_ATTEMPTS} times" in failed.error


def test_cancel_a_queued_or_running_job_and_not_a_finished_one(store):
    queued, running = store.submit("backtest", ["A"]), store.submit("backtest", ["B"])
    assert store.claim("w", 30).id == queued.id
    assert store.cancel(running.id).state is JobState.CANCELLED
    assert store.cancel(queued.id).state is JobState.CANCELLED
    assert store.heartbeat(queued.id, "w", 30) is JobState.CANCELLED  # the worker stops it
    assert store.finish(queued.id, "w", JobState.SUCCEEDED).state is JobState.CANCELLED
    with pytest.raises(IllegalTransitionError, match=r"is cancelled: it cannot become cancelled"):
        store.cancel(queued.id)


@pytest.mark.parametrize("bad, error, needle", [
    (lambda s: s.get(999), UnknownJobError, "job 999: no such job"),
    (lambda s: s.cancel(999), UnknownJobError, "job 999: no such job"),
    (lambda s: s.submit("evaluate", []), JobError, "job kind 'evaluate': expected one of train"),
    (lambda s: s.submit("train", [3]), JobError, "a list of strings"),
])
def test_bad_requests_are_one_line(store, bad, error, needle):
    with pytest.raises(error, match=needle):
        bad(store)


CLAIMERS, PROCESSES, JOBS = 8, 4, 40


def _claim_all(url: str, name: str, out) -> None:
    store = JobStore.open(url)
    while (job := store.claim(name, lease_s=60)) is not None:
        out.put((name, job.id))
    store.close()
    out.put((name, None))


def test_many_processes_claiming_at_once_never_get_the_same_job(db_url):
    store = JobStore.open(db_url)
    ids = {store.submit("backtest", [str(i)]).id for i in range(JOBS)}
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(db_url, f"w{i}", out)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    claims, ended = [], 0
    while ended < PROCESSES:
        name, job_id = out.get(timeout=60)
        ended += job_id is None
        if job_id is not None:
            claims.append((name, job_id))
    for p in procs:
        p.join(10)
    assert sorted(j for _, j in claims) == sorted(ids)  # each job claimed exactly once
    workers = {j.id: j.worker for j in store.list(limit=JOBS)}
    assert all(workers[j] == name for name, j in claims)


def test_many_threads_claiming_at_once_never_get_the_same_job(db_url):
    store = JobStore.open(db_url)
    for i in range(JOBS):
        store.submit("backtest", [str(i)])
    claims: list[int] = []
    lock = threading.Lock()

    def claimer(name):
        while (job := store.claim(name, lease_s=60)) is not None:
            with lock:
                claims.append(job.id)

    threads = [threading.Thread(target=claimer, args=(f"t{i}",)) for i in range(CLAIMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(claims) == len(set(claims)) == JOBS

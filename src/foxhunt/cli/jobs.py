"""`foxhunt submit`, `foxhunt jobs` (list, show, cancel) and `foxhunt worker`: runs queued in
foxhunt's database (`--db`, default FOXHUNT_HOME/foxhunt.db) and run by workers."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer

from foxhunt.cli.common import JsonOpt, emit_json, err, out, rich_table, settings_of

DbOpt = Annotated[str | None, typer.Option(
    "--db", help="Database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB (default: "
    "FOXHUNT_HOME/foxhunt.db).")]

jobs_app = typer.Typer(name="jobs", invoke_without_command=True, help=(
    "List the jobs (newest first); `show ID` for one, `cancel ID` to stop one."))


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(submit)
    app.command()(worker)
    app.add_typer(jobs_app)


def _store(ctx: typer.Context, db: str | None):
    from foxhunt.db import default_db_url
    from foxhunt.jobs import JobStore

    return JobStore.open(db or default_db_url(settings_of(ctx).home))


def _emit_job(job) -> None:
    """The `job` document: the job's own kind is `job_kind` (`kind` names the document)."""
    doc = job.doc()
    emit_json("job", {"job_kind": doc.pop("kind"), **doc})


def _bar(fraction) -> str:
    if fraction is None:
        return ""
    filled = round(20 * fraction)
    return f"{'█' * filled}{'·' * (20 - filled)} {fraction:.0%}"


def _what(job) -> str:
    p = job.progress
    if job.error:
        return job.error
    if "fold" in p and p.get("fold") is not None:
        return f"fold {p['fold']} epoch {p['epoch']}  loss {p.get('loss') or 0:.3f}"
    return str(p.get("phase", ""))


def _rows(jobs) -> list[list[str]]:
    from foxhunt.jobs.model import iso

    return [[str(j.id), j.kind.value, j.state.value, " ".join(j.args)[:40], j.submitted_by,
             iso(j.submitted_at) or "", str(j.attempts), j.worker or "",
             _bar(j.progress.get("fraction")), _what(j)[:60]] for j in jobs]


COLUMNS = ["id", "kind", "state", "args", "by", "submitted (UTC)", "tries", "worker", "progress",
           "doing"]


def submit(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="train, backtest, tune, paper or live.")],
    db: DbOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="Who submits it (default: the OS user).")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs the job asks for (default: 1 for train "
                                             "and tune, 0 otherwise).", min=0)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Queue a run for the workers: `foxhunt submit train -- SYMBOL --bars 1min --seed 1`; the
    arguments after `--` are those of `foxhunt KIND`. Prints the job's id."""
    store = _store(ctx, db)
    job = store.submit(kind, list(ctx.args), submitted_by=by or getpass.getuser(), gpus=gpus)
    if as_json:
        _emit_job(job)
    else:
        out.print(job.id)


@jobs_app.callback()
def jobs(
    ctx: typer.Context,
    db: DbOpt = None,
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="Only jobs in this state (queued, running, succeeded, failed, cancelled); "
        "repeatable (default: every state).")] = None,
    last: Annotated[int, typer.Option(help="The newest N jobs.", min=1)] = 50,
    as_json: JsonOpt = False,
) -> None:
    ctx.obj = {"db": db}
    if ctx.invoked_subcommand is not None:
        return
    from foxhunt.jobs import JobError, JobState

    states = state or []
    bad = [s for s in states if s not in JobState.__members__.values()]
    if bad:
        raise JobError(f"--state {bad[0]}: expected one of {', '.join(JobState)}")
    listed = _store(ctx, db).list(states, limit=last)
    if as_json:
        emit_json("jobs", {"jobs": [j.doc() for j in listed]})
    else:
        out.print(rich_table("jobs", COLUMNS, _rows(listed)))


def _db_of(ctx: typer.Context, db: str | None) -> str | None:
    return db or (ctx.parent.params.get("db") if ctx.parent else None)


@jobs_app.command()
def show(
    ctx: typer.Context,
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    follow: Annotated[bool, typer.Option("--follow", help="Show its progress until it ends.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """One job: its arguments, state, progress, result or error."""
    store = _store(ctx, _db_of(ctx, db))
    job = store.get(job_id)
    if follow and not job.state.finished:
        job = _follow(store, job)
    if as_json:
        _emit_job(job)
        return
    for key, value in job.doc().items():
        if value not in (None, {}, []):
            out.print(f"{key}: {value}", soft_wrap=True, markup=False, highlight=False)


def _follow(store, job):
    """A progress bar on stderr until the job ends; returns it ended."""
    import time

    from foxhunt.cli.train import progress_bar

    with progress_bar() as bar:
        task = bar.add_task(f"job {job.id} ({job.kind})", total=100, status=job.state.value)
        while not job.state.finished:
            time.sleep(1.0)
            job = store.get(job.id)
            bar.update(task, completed=100 * (job.progress.get("fraction") or 0),
                       status=f"{job.state}  {_what(job)}")
    return job


@jobs_app.command()
def cancel(
    ctx: typer.Context,
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a queued or running job (its worker stops it within a second or two)."""
    job = _store(ctx, _db_of(ctx, db)).cancel(job_id)
    if as_json:
        _emit_job(job)
    else:
        out.print(f"job {job.id} cancelled")


def worker(
    ctx: typer.Context,
    db: DbOpt = None,
    gpus: Annotated[str | None, typer.Option(
        help="GPUs to run on, one job each: e.g. 0,1 (default: none, --slots jobs on the CPU).")] = None,
    slots: Annotated[int, typer.Option(help="Jobs at once without --gpus.", min=1)] = 1,
    trials_per_gpu: Annotated[int | None, typer.Option(
        "--trials-per-gpu", help="A tune job's trials at once on its GPU (its --parallel; "
        "default: the job's own --parallel, else 1).",
        min=1)] = None,
    once: Annotated[bool, typer.Option("--once", help="Stop when the queue is empty.")] = False,
    max_jobs: Annotated[int | None, typer.Option(
        "--max-jobs", help="Stop after running N jobs (default: no limit).", min=1)] = None,
    lease: Annotated[float, typer.Option(
        help="Seconds a job stays this worker's without a heartbeat; a killed worker's job is "
        "taken over after it.", min=1.0)] = 15.0,
    ray: Annotated[str | None, typer.Option(
        "--ray", help="Run the jobs as Ray tasks: auto (the running cluster), local (a new one "
        "here) or the cluster's ADDRESS (default: child processes on this machine).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Claim queued jobs and run them (each as `foxhunt KIND ARGS --json`), until stopped (or
    with --once, until the queue is empty). A killed worker's jobs are resumed by another."""
    from foxhunt import telemetry
    from foxhunt.jobs.model import JobError
    from foxhunt.jobs.worker import Worker, WorkerConfig

    telemetry.configure("foxhunt-worker")
    gpu_list = tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else ()
    if gpus is not None and (not gpu_list or not all(g.isdigit() for g in gpu_list)):
        raise JobError(f"--gpus {gpus!r}: expected GPU numbers separated by commas, e.g. 0,1")
    store = _store(ctx, db)
    config = WorkerConfig(home=settings_of(ctx).home, gpus=gpu_list, slots=slots,
                          trials_per_gpu=trials_per_gpu, once=once, max_jobs=max_jobs,
                          lease_s=lease, heartbeat_s=min(1.0, lease / 3))
    executor = None
    if ray is not None:
        from foxhunt.jobs.ray_exec import RayExecutor

        executor = RayExecutor(ray, num_cpus=max(slots, len(gpu_list)) + 1)

    def said(job) -> None:
        if not as_json:
            err.print(f"job {job.id} ({job.kind} {' '.join(job.args)}): {job.state}"
                      + (f": {job.error}" if job.error else ""),
                      soft_wrap=True, markup=False, highlight=False)

    if not as_json:
        where = f"GPUs {','.join(gpu_list)}" if gpu_list else f"{slots} CPU slot(s)"
        err.print(f"worker {config.name} on {where}" + (f", Ray {ray}" if ray else ""),
                  markup=False, highlight=False)
    ran = Worker(store, config, executor, on_change=said).run()
    if as_json:
        emit_json("jobs", {"jobs": [j.doc() for j in ran]})

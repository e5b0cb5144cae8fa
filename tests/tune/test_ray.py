"""`--backend ray`: trials as Ray tasks on a local Ray instance (CPU). Ray's start-up costs a
few seconds (about 5 s on the 2-core CI machine), so one test covers it."""

from __future__ import annotations

import pytest

from foxhunt.tune.study import run_study

from .builders import SOURCE, config, context, space

ray = pytest.importorskip("ray")


def test_trials_run_as_ray_tasks_on_a_local_instance(tmp_path):
    try:
        doc = run_study(config(tmp_path, trials=2, parallel=2, backend="ray"), context(tmp_path),
                        space(), SOURCE)
    finally:
        ray.shutdown()
    assert [t["state"] for t in doc["trials"]] == ["complete", "complete"]
    assert doc["throughput"]["backend"] == "ray" and doc["deflated_sharpe"]["n_trials"] == 2

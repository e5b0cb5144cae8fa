"""Suite-wide fixtures: every test gets its own FOXHUNT_HOME; GPU tests skip without CUDA."""

from __future__ import annotations

import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)  # one thread per worker: two workers share the two cores


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("foxhunt_home")
    monkeypatch.setenv("FOXHUNT_HOME", str(home))
    monkeypatch.delenv("FOXHUNT_GPU_PROFILE", raising=False)
    return home


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

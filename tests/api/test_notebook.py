"""examples/quickstart.ipynb runs top to bottom in a fresh kernel (as a reader would run it) and
is the notebook its percent-format script builds."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

EXAMPLES = Path(__file__).parents[2] / "examples"


def build_notebook():
    spec = importlib.util.spec_from_file_location("build_notebook", EXAMPLES / "build_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebook_is_built_from_its_script():
    assert build_notebook().main(["--check"]) == 0, "run python examples/build_notebook.py"


def test_the_quickstart_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's throwaway FOXHUNT_HOME
    nb = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    began = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - began
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    reports = [Path(line) for line in nb.cells[-1].outputs[0].text.split()]
    assert [p.name for p in reports] == ["signal.html", "run.html"]
    assert all(p.is_file() and tmp_path in p.parents for p in reports)
    print(f"quickstart.ipynb ran in {seconds:.1f} s")

"""Build `quickstart.ipynb` from `quickstart.py` (jupytext's percent format), without outputs.

    python examples/build_notebook.py            # rewrite the .ipynb next to each script
    python examples/build_notebook.py --check    # exit 1 if an .ipynb is out of date

The script is the source: edit it, then rebuild. (`jupytext --to ipynb quickstart.py` gives
the same cells where jupytext is installed; this needs only nbformat.) Cell ids are numbered,
so rebuilding an unchanged script rewrites the same file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).parent
SCRIPTS = ("quickstart.py",)
MARKER = "# %%"
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def cells_of(text: str) -> list[tuple[str, str]]:
    """(kind, source) of each `# %%` cell; the header before the first is jupytext's."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith(MARKER):
            cells.append(("markdown" if "[markdown]" in line else "code", []))
        elif cells:
            cells[-1][1].append(line)
    out = []
    for kind, lines in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        if kind == "markdown":
            lines = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines]
        out.append((kind, "\n".join(lines)))
    return out


def notebook(script: Path) -> nbformat.NotebookNode:
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}
    cells = [make[kind](source, id=f"cell-{i}")
             for i, (kind, source) in enumerate(cells_of(script.read_text()))]
    return nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": KERNEL, "language_info": {"name": "python"},
        "jupytext": {"formats": "ipynb,py:percent"}})


def render(script: Path) -> str:
    return nbformat.writes(notebook(script)) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    for name in SCRIPTS:
        script = HERE / name
        target = script.with_suffix(".ipynb")
        text = render(script)
        if "--check" in argv:
            if not target.is_file() or target.read_text() != text:
                stale.append(str(target))
        else:
            target.write_text(text)
            print(f"wrote {target}")
    for path in stale:
        print(f"{path} is out of date: run python examples/build_notebook.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Files shipped in the netsim repository (topologies, studies, example workloads) but not in the
installed package: found from the working directory, so notebooks and examples work after a
non-editable ``pip install .`` when run from a checkout (its root or any folder inside it).

>>> find_shipped("topologies/dgx-h100.yaml").name
'dgx-h100.yaml'
"""

from __future__ import annotations

from pathlib import Path


def find_shipped(relative: str, start: str | Path | None = None) -> Path:
    """``relative`` (e.g. ``"topologies/studies/fat_tree_design.yaml"``) under ``start`` (default:
    the working directory) or the nearest folder above it that has it; else next to the imported
    package (an editable install or a source checkout on ``PYTHONPATH``).

    Raises FileNotFoundError naming the file and where to run from."""
    here = Path.cwd() if start is None else Path(start)
    here = here.resolve()
    package_checkout = Path(__file__).resolve().parents[1]
    for base in (here, *here.parents, package_checkout):
        candidate = base / relative
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{relative}: not found from {here} or its parents; run from a netsim checkout "
                            "(its root or a folder inside it, e.g. notebooks/)")

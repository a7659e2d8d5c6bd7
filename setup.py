"""Build hook: ship the repository's ``workloads/`` folder inside the package as ``netsim/_workloads``.

Everything else is declared in ``pyproject.toml``.  ``workloads/`` (model presets, example traces,
fault and straggler files, expert maps) stays the one canonical copy at the top of the checkout;
``build_py`` copies it into the build so a wheel (``pip install .``, ``pip wheel .``) carries it,
and :func:`netsim.workload.generate.presets.workloads_dir` finds it there.  Editable installs and
source checkouts read ``workloads/`` in place.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: Top-level folder copied into the package, and its name there (netsim.workload.generate.presets).
SOURCE, TARGET = "workloads", ("netsim", "_workloads")


class build_py_with_workloads(build_py):  # noqa: N801 (setuptools command naming)
    """``build_py`` that also copies ``workloads/`` into ``<build_lib>/netsim/_workloads``."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads workloads/ from the checkout
        src = Path(__file__).resolve().parent / SOURCE
        dst = Path(self.build_lib).joinpath(*TARGET)
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.pyc", ".*"))


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__
    setup(cmdclass={"build_py": build_py_with_workloads})

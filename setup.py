"""Build hook: ship the repository's ``topologies/`` and ``workloads/`` folders inside the package
as ``netsim/_topologies`` and ``netsim/_workloads``.

Everything else is declared in ``pyproject.toml``.  ``topologies/`` (the shipped clusters and
``studies/``) and ``workloads/`` (model presets, example traces, fault and straggler files, expert
maps) stay the one canonical copy at the top of the checkout; ``build_py`` copies them into the
build so a wheel (``pip install .``, ``pip wheel .``) carries them, and
:func:`netsim.shipped.package_folder` finds them there (bare names such as ``--topology dgx-h100``
and repository-relative paths resolve through it: :mod:`netsim.shipped`).  Editable installs and
source checkouts read the folders in place.  Scripts (``workloads/regenerate.py``) stay out.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: Top-level folders copied into the package, each as ``netsim/_<folder>`` (netsim.shipped.ROOTS).
SOURCES = ("topologies", "workloads")
PACKAGE = "netsim"


class build_py_with_shipped(build_py):  # noqa: N801 (setuptools command naming)
    """``build_py`` that also copies each of :data:`SOURCES` into ``<build_lib>/netsim/_<folder>``."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the folders from the checkout
        for name in SOURCES:
            src = Path(__file__).resolve().parent / name
            dst = Path(self.build_lib) / PACKAGE / f"_{name}"
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.pyc", ".*"))


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__
    setup(cmdclass={"build_py": build_py_with_shipped})

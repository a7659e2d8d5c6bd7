"""The generator's model presets: the YAMLs of the repository's ``workloads/models/`` folder.

One source of truth: every preset is a file ``workloads/models/<name>.yaml`` with the
published shapes and a ``source`` citation (see ``workloads/README.md``).  The files are
found in the installed package (``netsim/_workloads``, copied into the wheel from
``workloads/`` by ``setup.py``'s ``build_py``) or, in a source checkout or editable install,
in ``workloads/`` beside the package (:func:`netsim.shipped.package_folder`).

Examples
--------
>>> "llama3-405b" in PRESETS and PRESETS["llama3-405b"].gated_mlp
True
>>> workloads_dir().joinpath("models", "deepseek-v3.yaml").is_file()
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from netsim.errors import InputError
from netsim.shipped import package_folder, resolve
from netsim.workload.generate.model import ModelSpec, read_model_yaml

__all__ = ["PRESETS", "Presets", "workloads_dir"]


def workloads_dir() -> Path:
    """The shipped ``workloads`` folder: ``netsim/_workloads`` when installed from a wheel, else
    the checkout's ``workloads/`` (editable install or source tree): :func:`netsim.shipped.package_folder`.

    Raises FileNotFoundError when neither exists (a broken install)."""
    found = package_folder("workloads")
    if found is None or not (found / "models").is_dir():
        raise FileNotFoundError("netsim's shipped workloads are missing: the package has no _workloads/models "
                                "folder (nor is it a source checkout with workloads/models); reinstall netsim")
    return found


class Presets(Mapping):
    """Read-only mapping name -> :class:`~netsim.workload.generate.model.ModelSpec` over the
    ``*.yaml`` files of ``folder`` (default: ``workloads_dir() / "models"``), read on first use."""

    def __init__(self, folder: str | Path | None = None):
        self._folder = None if folder is None else Path(folder)
        self._specs: dict | None = None

    @property
    def folder(self) -> Path:
        return self._folder if self._folder is not None else workloads_dir() / "models"

    def _load(self) -> dict:
        if self._specs is None:
            specs = {}
            for path in sorted(self.folder.glob("*.yaml")):
                spec = read_model_yaml(path)
                specs[spec.name] = spec
            self._specs = specs
        return self._specs

    def __getitem__(self, name: str):
        return self._load()[name]

    def __iter__(self):
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._load()

    def __repr__(self) -> str:
        return f"Presets({str(self.folder)!r})"


#: The built-in models, by name (the shipped ``workloads/models/*.yaml``).
PRESETS = Presets()


def load_model_spec(model: str | os.PathLike | ModelSpec) -> ModelSpec:
    """A preset by name, or a model read from a YAML file with the keys of :class:`ModelSpec`.

    Parameters
    ----------
    model
        A :class:`ModelSpec`, a key of :data:`PRESETS` or a path to a YAML file.

    Returns
    -------
    ModelSpec

    Examples
    --------
    >>> load_model_spec("llama3-70b").layers
    80
    """
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str) and model in PRESETS:
        return PRESETS[model]
    path = Path(resolve(model))  # a file, or a repository-relative path shipped (workloads/models/...)
    if not path.is_file():
        raise InputError(f"not a preset ({', '.join(PRESETS)}) nor a YAML file", source=str(model))
    return read_model_yaml(path)

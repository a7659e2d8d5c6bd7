"""The files the netsim repository ships (topologies, studies, example workloads), by path or by name.

The wheel carries the repository's ``topologies/`` and ``workloads/`` folders inside the package,
as ``netsim/_topologies`` and ``netsim/_workloads`` (``setup.py``'s ``build_py`` copies them); a
source checkout or an editable install reads them in place.  A path a user gives (a flag, an API
argument, a notebook's input) is looked up by :func:`resolve`:

1. as given, from the working directory: a file there always wins;
2. a repository-relative path (``topologies/dgx-h100.yaml``, ``workloads/faults/stragglers.yaml``)
   that is not there: the same path in the installed package;
3. a bare name of a kind of input (``dgx-h100`` for a topology, ``stragglers`` for faults: see
   :data:`KINDS`): ``NAME.yaml`` in the working directory, then ``topologies/NAME.yaml`` (the kind's
   folder) in the working directory, then in the installed package.  An unknown bare name is an
   :class:`~netsim.errors.InputError` listing the nearest shipped names.

>>> find_shipped("topologies/dgx-h100.yaml").name
'dgx-h100.yaml'
>>> resolve("dgx-h100", "topology").name, resolve("stragglers", "faults").name
('dgx-h100.yaml', 'stragglers.yaml')
>>> resolve("dgx-h10", "topology")
Traceback (most recent call last):
...
netsim.errors.InputError: dgx-h10: no such file, nor a shipped topology name; nearest shipped: dgx-h100, dgx-a100, dgx1-v100-nvlink, p4d-a100-shared-nic
"""

from __future__ import annotations

import difflib
import glob
import os
from pathlib import Path, PurePath

from netsim.errors import InputError

#: Top-level folders of the repository that the wheel carries as ``netsim/_<folder>``.
ROOTS = ("topologies", "workloads")

#: Kinds of input a bare name may name: (the folder of the repository holding them, suffixes tried).
KINDS = {
    "topology": ("topologies", (".yaml", ".yml")),
    "study": ("topologies/studies", (".yaml", ".yml")),
    "faults": ("workloads/faults", (".yaml", ".yml")),
    "expert map": ("workloads/expert-maps", (".npy", ".csv")),
}

#: How many of the nearest shipped names an unknown bare name's error lists.
NEAREST = 4


def package_folder(root: str) -> Path | None:
    """Where the installed package keeps the repository folder ``root`` (one of :data:`ROOTS`):
    ``netsim/_<root>`` in an installed wheel, ``<checkout>/<root>`` in a source checkout or an
    editable install; None when neither exists (a broken install)."""
    pkg = Path(__file__).resolve().parent
    candidates = [pkg / f"_{root}"]
    if (pkg.parent / "pyproject.toml").is_file():  # a source tree: the folder beside the package
        candidates.append(pkg.parent / root)
    return next((c for c in candidates if c.is_dir()), None)


def find_shipped(relative: str, start: str | Path | None = None) -> Path:
    """The shipped file ``relative`` (a repository-relative path such as
    ``"topologies/studies/fat_tree_design.yaml"`` or ``"workloads/faults/stragglers.yaml"``):
    under ``start`` (default: the working directory) if it is there, else in the installed package.

    Raises FileNotFoundError naming the file and the folders looked in."""
    here = (Path.cwd() if start is None else Path(start)).resolve()
    candidate = here / relative
    if _exists(candidate):
        return candidate
    packaged = _in_package(PurePath(relative))
    if packaged is not None and _exists(packaged):
        return packaged
    where = package_folder(PurePath(relative).parts[0]) if packaged is not None else None
    raise FileNotFoundError(f"{relative}: not found in {here} nor in the installed netsim "
                            f"({where or 'which ships ' + ' and '.join(f'{r}/' for r in ROOTS)})")


def resolve(value, kind: str | None = None, *, prefix: bool = False):
    """The file a user means by ``value``: as given if it exists, else a repository-relative path
    from the installed package, else (with ``kind``, a key of :data:`KINDS`) a bare name looked up
    as the module docstring says.  ``prefix``: ``value`` names a trace set ``P.<rank>.et``.

    Returns ``value`` unchanged when it is not a path (a mapping, a built object) or names nothing
    shipped (its loader then says "no such file"), else a :class:`~pathlib.Path`.  Raises
    InputError for a bare name of ``kind`` that is neither a file nor shipped."""
    if not isinstance(value, (str, os.PathLike)):
        return value
    path = Path(value)
    if _exists(path, prefix):
        return path
    packaged = _in_package(path)
    if packaged is not None and _exists(packaged, prefix):
        return packaged
    if kind is None or len(path.parts) != 1 or path.name in ("", ".", "..") or _refused(path):
        return value  # not a bare name, or one the OS refuses (its loader says why)
    folder, suffixes = KINDS[kind]
    names = [path.name] if path.suffix.lower() in suffixes else [path.name + s for s in suffixes]
    bases = [b for b in (Path(), Path(folder), _in_package(PurePath(folder))) if b is not None]
    for candidate in (base / name for base in bases for name in names):
        if _exists(candidate):
            return candidate
    raise InputError(f"no such file, nor a shipped {kind} name; nearest shipped: "
                     f"{', '.join(nearest(path.name, kind)) or '(none: the installed package has no shipped files)'}",
                     source=str(value))


def nearest(name: str, kind: str, n: int = NEAREST) -> list[str]:
    """The ``n`` shipped names of ``kind`` closest to ``name`` (closest first)."""
    folder, suffixes = KINDS[kind]
    found = _in_package(PurePath(folder))
    names = sorted({p.stem for p in found.iterdir() if p.suffix.lower() in suffixes}) if found is not None else []
    stem = name[: -len(Path(name).suffix)] if Path(name).suffix.lower() in suffixes else name
    return difflib.get_close_matches(stem, names, n=n, cutoff=0.0)


def _in_package(path: PurePath) -> Path | None:
    """``path`` (repository-relative, e.g. ``topologies/x.yaml``) inside the installed package."""
    if path.is_absolute() or len(path.parts) < 1 or path.parts[0] not in ROOTS or ".." in path.parts:
        return None
    base = package_folder(path.parts[0])
    return None if base is None else base.joinpath(*path.parts[1:])


def _refused(path: Path) -> bool:
    """The OS refuses ``path`` as a name (too long, a NUL byte)."""
    try:
        path.exists()
    except (OSError, ValueError):
        return True
    return "\0" in str(path)


def _exists(path: Path, prefix: bool = False) -> bool:
    """``path`` is a file (or, ``prefix``, a trace set ``path.<rank>.et`` or one ``.et`` file);
    False for a name the OS refuses (too long, a NUL byte: the loader reports those)."""
    try:
        if path.is_file():
            return True
        return prefix and path.parent.is_dir() and any(path.parent.glob(f"{glob.escape(path.name)}.*.et"))
    except (OSError, ValueError):
        return False

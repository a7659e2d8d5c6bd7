"""Where the compiled flow kernels are cached, and the decorator that compiles them.

numba's on-disk cache (``cache=True``) checks a function's own source file only: a kernel of
:mod:`~netsim.network.flowrepair` that calls one of :mod:`~netsim.network.flowkernel` would load
stale machine code after the callee's file changed.  So every kernel is cached in a directory
named by a hash of both files (:func:`cache_dir`): edit either, and nothing old is reused.  The
directory is under ``NUMBA_CACHE_DIR`` when that is set, else the user cache
(``$XDG_CACHE_HOME`` or ``~/.cache``, ``netsim/``), so read-only installs cache too.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

#: The modules whose kernels share one cache directory.
KERNEL_FILES = ("flowkernel.py", "flowrepair.py", "drainkernel.py", "stepkernel.py", "runqueue.py", "runsteps.py",
                "runkernel.py")


@lru_cache(maxsize=None)
def cache_dir(files: tuple[str, ...] = (), prefix: str = "flow-kernels") -> str:
    """The cache directory of the kernels defined in ``files`` (paths; default: this package's
    :data:`KERNEL_FILES`), named ``prefix-<hash of the files>`` (see the module docstring)."""
    here = Path(__file__).parent
    paths = [Path(f) for f in files] or [here / name for name in KERNEL_FILES]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:16]
    base = os.environ.get("NUMBA_CACHE_DIR") or \
        str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netsim")
    return str(Path(base) / f"{prefix}-{digest}")


def kernel(fn, files: tuple[str, ...] = (), prefix: str = "flow-kernels"):
    """``numba.njit(cache=True)`` with the cache in :func:`cache_dir` ``(files, prefix)`` (numba reads
    its cache directory when a function is decorated; the setting is put back at once)."""
    import numba

    previous = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = cache_dir(tuple(files), prefix)
    try:
        return numba.njit(cache=True)(fn)
    finally:
        numba.config.CACHE_DIR = previous

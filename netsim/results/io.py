"""Atomic result files: written to a temporary name in the target folder, then renamed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_parquet_atomic(path: str | os.PathLike, frame) -> None:
    """Write a DataFrame as Parquet so that a reader never sees a partial file.

    >>> import pandas as pd, tempfile, os
    >>> d = tempfile.mkdtemp(); write_parquet_atomic(os.path.join(d, "x.parquet"), pd.DataFrame({"a": [1]}))
    >>> pd.read_parquet(os.path.join(d, "x.parquet")).a.tolist()
    [1]
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

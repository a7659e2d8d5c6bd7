"""Output paths: checked before any simulation starts, written atomically, never through
a non-regular file.

Every command that writes calls :func:`check_output_file` (a file: ``-J``, ``--parquet``,
``timeline --out``) or :func:`check_output_dir` (a folder: results datasets, ``workload
llm --out``, ``sweep --out``, ``astra export --out``, ``--plots``) before it simulates, so a
bad path is one line (exit 2) instead of a traceback after the run.  The rules:

* a file's folder must exist and be writable; a folder may be created, but its nearest
  existing ancestor must be a writable folder (not a regular file);
* an existing file is replaced only with ``--overwrite`` and only if it is a regular file:
  symbolic links, FIFOs, devices and sockets are refused even with ``--overwrite``;
* files are written to a temporary name in their folder and renamed into place
  (:func:`atomic_file`, :func:`publish`), with the permissions the umask gives new files
  (``0666 & ~umask``), not the ``0600`` of a temporary file;
* a temporary file (``.<name>.<random>.tmp``, :class:`TempFile`) is locked (``flock``) by its
  writer while it exists, and the lock dies with the writer, even one killed by SIGKILL: a
  temporary file nobody holds is a dead writer's leftover, which :func:`remove_stale_temps`
  removes.  :func:`check_output_file` and :func:`atomic_file` remove those of their target; a
  failed write removes its own.

>>> import os, stat, tempfile
>>> d = tempfile.mkdtemp()
>>> with atomic_file(os.path.join(d, "a.txt"), "w") as fh:
...     _ = fh.write("hi")
>>> open(os.path.join(d, "a.txt")).read(), stat.S_IMODE(os.stat(os.path.join(d, "a.txt")).st_mode) == new_file_mode()
('hi', True)
>>> check_output_file(os.path.join(d, "a.txt"))
Traceback (most recent call last):
...
netsim.errors.InputError: ...a.txt: exists; pass --overwrite to replace it
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator

from netsim.errors import InputError

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def _label(path: Path, flag: str | None) -> str:
    return f"{flag} {path}" if flag else str(path)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a component of the path is a regular file
        return None
    except OSError as exc:
        raise InputError(f"cannot be examined ({exc.strerror})", source=str(path)) from None


def kind_of(path: str | os.PathLike) -> str | None:
    """``None`` if ``path`` does not exist, ``"a regular file"`` or what else it is (not following links).

    >>> kind_of("/dev/null"), kind_of("/no/such/file")
    ('a character device', None)
    """
    st = _lstat(Path(path))
    if st is None:
        return None
    if stat.S_ISREG(st.st_mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")


def _writable_folder(folder: Path, label: str, *, create: bool) -> None:
    """``folder`` must be a writable folder; with ``create``, its nearest existing ancestor."""
    probe = folder
    while True:
        st = _lstat(probe)
        if st is not None or probe.parent == probe:
            break
        if not create:
            raise InputError(f"the folder {folder} does not exist", source=label)
        probe = probe.parent
    if st is None:
        raise InputError(f"the folder {probe} does not exist", source=label)
    if not probe.is_dir():  # follows a link to a folder, which is fine
        raise InputError(f"{probe} is {kind_of(probe)}, not a folder", source=label)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"the folder {probe} is not writable", source=label)


def check_output_file(path: str | os.PathLike, *, overwrite: bool = False, flag: str | None = None) -> Path:
    """Raise :class:`InputError` unless ``path`` can be written as a regular file now.

    Its folder must exist and be writable; an existing ``path`` must be a regular file and
    ``overwrite`` true.  ``flag`` (``"-J"``) is named in the error.  Returns ``path`` as a Path.
    """
    target = Path(path)
    label = _label(target, flag)
    if not str(path) or target.name in ("", ".", ".."):
        raise InputError("expected a file name", source=label)
    kind = kind_of(target)
    if kind is not None and kind != "a regular file":
        raise InputError(f"is {kind}; netsim writes regular files only and does not replace it",
                         source=label)
    if kind is not None and not overwrite:
        raise InputError("exists; pass --overwrite to replace it", source=label)
    _writable_folder(target.parent, label, create=False)
    remove_stale_temps(target.parent, target.name)
    return target


def check_output_dir(path: str | os.PathLike, *, flag: str | None = None, what: str = "a folder") -> Path:
    """Raise :class:`InputError` unless ``path`` is, or can be created as, a writable folder.

    ``what`` says what the folder is for (``"a results directory"``).  Returns ``path`` as a Path.
    """
    target = Path(path)
    label = _label(target, flag)
    if not str(path):
        raise InputError("expected a folder name", source=label)
    if target.exists() and not target.is_dir():
        raise InputError(f"is {kind_of(target)}, not {what}", source=label)
    _writable_folder(target, label, create=True)
    return target


def new_file_mode() -> int:
    """``0666 & ~umask``: the mode ``open()`` gives a new file (read without changing the umask
    where ``/proc`` tells it, so threads never see a cleared umask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def publish(tmp: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Give ``tmp`` the umask's permissions and rename it to ``target``, which must not be a
    symbolic link, FIFO, device or folder (it may be absent or a regular file)."""
    target = Path(target)
    kind = kind_of(target)
    if kind is not None and kind != "a regular file":
        raise InputError(f"is {kind}; netsim writes regular files only and does not replace it",
                         source=str(target))
    os.chmod(tmp, new_file_mode())
    os.replace(tmp, target)
    return target


class TempFile:
    """A new empty hidden file next to ``target`` (``.<name>.<random><suffix>``), locked by this
    process until :meth:`release` (or :meth:`discard`, which also removes it).

    The lock (``flock``, exclusive) is what tells a file being written from a dead writer's
    leftover: the kernel drops it when the holder exits, however it exits.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); t = TempFile(os.path.join(d, "x.json"))
    >>> os.path.basename(t.path).startswith(".x.json."), remove_stale_temps(d, "x.json")
    (True, [])
    >>> t.release(); [os.path.basename(p) for p in remove_stale_temps(d, "x.json")] == [os.path.basename(t.path)]
    True
    """

    def __init__(self, target: str | os.PathLike, suffix: str = ".tmp"):
        target = Path(target)
        while True:
            fd, path = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
            _lock(fd)
            try:  # a cleaner may have taken it between mkstemp and the lock: then it is gone, or another file
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        self.path, self._fd = path, fd

    def release(self) -> None:
        """Drop the lock (the file stays: renamed into place, or now anyone's to remove)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def discard(self) -> None:
        """Remove the file if it is still there, and drop the lock."""
        try:
            if os.path.exists(self.path):
                os.unlink(self.path)
        finally:
            self.release()


def _lock(fd: int, wait: bool = True) -> bool:
    """Take the exclusive ``flock`` of ``fd``; False if another process holds it (no ``fcntl``: True)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, and remove_stale_temps removes nothing
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:  # BlockingIOError: a live writer holds it
        return False
    return True


def remove_stale_temps(folder: str | os.PathLike, name: str, suffix: str = ".tmp") -> list[Path]:
    """Remove the temporary files of ``folder/name`` (``.<name>.*<suffix>``, regular files) that no
    process holds (:class:`TempFile`): those of writers that died, even by SIGKILL.  Files being
    written, and files this user may not open, are left alone.  Returns the removed paths."""
    try:
        import fcntl  # noqa: F401 - without flock a live writer's file cannot be told apart: keep all
    except ImportError:
        return []
    removed = []
    for p in sorted(Path(folder).glob(f".{glob.escape(name)}.*{suffix}")):
        try:
            fd = os.open(p, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # gone, a symbolic link, a FIFO's peer, not ours: leave it
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and _lock(fd, wait=False) and os.lstat(p).st_ino == st.st_ino:
                os.unlink(p)
                removed.append(p)
        except OSError:  # removed meanwhile, or a read-only folder: nothing to do
            pass
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """Open a temporary file next to ``target`` (:class:`TempFile`); on success it replaces
    ``target`` (:func:`publish`), on an exception it is removed and ``target`` is left as it was.
    Dead writers' temporary files of ``target`` are removed first."""
    remove_stale_temps(Path(target).parent, Path(target).name)
    tmp = TempFile(target)
    try:
        with open(tmp.path, mode, **kwargs) as fh:
            yield fh
        publish(tmp.path, target)
    finally:
        tmp.discard()


def write_parquet_atomic(path: str | os.PathLike, frame) -> None:
    """Write a DataFrame as Parquet so that a reader never sees a partial file.

    >>> import pandas as pd, tempfile, os
    >>> d = tempfile.mkdtemp(); write_parquet_atomic(os.path.join(d, "x.parquet"), pd.DataFrame({"a": [1]}))
    >>> pd.read_parquet(os.path.join(d, "x.parquet")).a.tolist()
    [1]
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(target, "wb") as fh:
        frame.to_parquet(fh, index=False)

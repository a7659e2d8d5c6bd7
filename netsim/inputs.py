"""Reading user input safely: files, YAML, JSON and bounded numbers.

Every loader goes through here so that bad input becomes one
:class:`~netsim.errors.InputError` line (exit status 2) instead of a traceback,
a hang or runaway memory:

* :func:`read_bytes` / :func:`read_text` read **regular files only** (a
  directory, FIFO or device such as ``/dev/zero`` is refused before it is
  opened for reading) of at most a documented size, as UTF-8 text.
* :func:`load_yaml` parses with a :class:`BoundedLoader`: nesting depth and the
  alias-expanded size are bounded (a "billion laughs" file is refused), and a
  YAML error is reduced to one line naming the line and column.
* :func:`load_json` bounds nesting depth before parsing and refuses
  ``NaN``/``Infinity`` (not JSON, though Python's parser accepts them).
* :func:`number` checks a value is a finite number within a range; :func:`int_text` and
  :func:`float_text` read one from text (a flag, a token of a file): ASCII digits only (Python's
  ``int`` and ``float`` also read other scripts' digits: ``int("٣")`` is 3), bounded before use.
* :func:`path_text` checks a file path from a document (a string, no NUL byte, not too long).

Limits are class attributes of :class:`Limits` (one object, :data:`LIMITS`),
so a caller that needs more passes its own.

>>> load_yaml_text("a: [1, 2]", "x.yaml")
{'a': [1, 2]}
>>> number(1e308 * 10, "f.yaml", "factor")
Traceback (most recent call last):
...
netsim.errors.InputError: f.yaml: factor: expected a finite number, got inf
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml

from netsim.errors import InputError


@dataclass(frozen=True)
class Limits:
    """Input size limits (override per call by passing another ``Limits``).

    yaml_bytes: pure-Python PyYAML parses ~0.5 MB/s (measured), so 1 MiB is ~2 s; netsim's
        shipped YAML files are under 3 KB and generated fault/sweep files stay well below.
    json_bytes: ASTRA-sim JSON (system, remote memory, comm groups for 64k ranks) is far
        smaller; the C JSON parser reads 64 MiB in about a second.
    text_bytes: placement and other text files (64 MiB, as the placement reader had).
    depth: nesting of YAML/JSON containers; netsim's own formats nest at most ~6 levels.
    yaml_nodes: YAML nodes after alias expansion (an anchor used twice counts twice).
    """

    yaml_bytes: int = 1 << 20
    json_bytes: int = 64 << 20
    text_bytes: int = 64 << 20
    depth: int = 64
    yaml_nodes: int = 1_000_000


LIMITS = Limits()


# ------------------------------------------------------------------ files
def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def check_regular(path: str | os.PathLike, max_bytes: int, what: str = "file") -> int:
    """Size of ``path`` if it is a regular file of at most ``max_bytes``; else InputError."""
    src = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("no such file", source=src) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=src) from None
    except ValueError:  # a NUL byte: no file has such a name
        raise InputError("expected a file path without NUL bytes", source=repr(src)) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"is a directory; expected a {what}", source=src)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"is not a regular file (a FIFO, socket or device); expected a {what}", source=src)
    if st.st_size > max_bytes:
        raise InputError(f"is {_fmt_bytes(st.st_size)}; expected a {what} of at most {_fmt_bytes(max_bytes)}",
                         source=src)
    return st.st_size


def read_bytes(path: str | os.PathLike, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (checked again after reading)."""
    check_regular(path, max_bytes, what)
    try:
        with open(path, "rb") as f:  # a read buffer of the file's size, not of the limit
            want = min(os.fstat(f.fileno()).st_size, max_bytes) + 1
            data = f.read(want)
            if len(data) == want <= max_bytes:  # it grew since: read on, to the limit
                data += f.read(max_bytes + 1 - want)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    if len(data) > max_bytes:
        raise InputError(f"expected a {what} of at most {_fmt_bytes(max_bytes)}", source=str(path))
    return data


def read_text(path: str | os.PathLike, max_bytes: int | None = None, what: str = "text file") -> str:
    """A regular file decoded as UTF-8 (a BOM is dropped); InputError names the first bad byte."""
    data = read_bytes(path, LIMITS.text_bytes if max_bytes is None else max_bytes, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"expected UTF-8 text, got byte 0x{data[exc.start]:02x} at offset {exc.start}",
                         source=str(path), field=f"line {line}") from None


# ------------------------------------------------------------------ YAML
class BoundedLoader(yaml.SafeLoader):
    """SafeLoader with bounded nesting depth and bounded alias expansion."""

    limits = LIMITS

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: D401 - PyYAML API
        self._depth += 1
        try:
            if self._depth > self.limits.depth:
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"nested deeper than {self.limits.depth} levels at line {mark.line + 1}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self):  # noqa: D401 - PyYAML API
        node = super().get_single_node()
        if node is not None:
            _ExpandedSize(self.limits.yaml_nodes).of(node)
        return node


class _ExpandedSize:
    """Counts YAML nodes as if every alias were copied; raises past ``cap`` (linear time, memoized)."""

    def __init__(self, cap: int):
        self.cap, self.memo = cap, {}

    def of(self, node) -> int:
        stack, order = [node], []
        while stack:  # iterative post-order: no recursion on deep-but-allowed documents
            n = stack.pop()
            if id(n) in self.memo:
                continue
            self.memo[id(n)] = None
            order.append(n)
            stack.extend(self._children(n))
        for n in reversed(order):
            size = 1 + sum(self.memo[id(c)] or 0 for c in self._children(n))
            if size > self.cap:
                raise yaml.YAMLError(f"expands to more than {self.cap:,} values (YAML aliases/anchors "
                                     "repeated too often)")
            self.memo[id(n)] = size
        return self.memo[id(node)]

    @staticmethod
    def _children(n) -> list:
        if isinstance(n, yaml.SequenceNode):
            return list(n.value)
        if isinstance(n, yaml.MappingNode):
            return [x for kv in n.value for x in kv]
        return []


def _yaml_problem(exc: Exception) -> tuple[str, str | None]:
    """One-line description and ``line N`` of a YAML error."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    problem = " ".join(str(problem).split())
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
    return problem, where


def load_yaml_text(text: str, source: str, limits: Limits = LIMITS) -> Any:
    """Parse YAML text with :class:`BoundedLoader`; one-line InputError on any problem."""
    loader_cls = BoundedLoader if limits is LIMITS else type("Loader", (BoundedLoader,), {"limits": limits})
    try:
        return yaml.load(text, Loader=loader_cls)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem, where = _yaml_problem(exc)
        raise InputError(f"not valid YAML ({problem})", source=source, field=where) from None
    except RecursionError:
        raise InputError(f"not valid YAML (nested deeper than {limits.depth} levels)", source=source) from None


def load_yaml(path: str | os.PathLike, limits: Limits = LIMITS) -> Any:
    """Read and parse a YAML file (regular, UTF-8, at most ``limits.yaml_bytes``)."""
    return load_yaml_text(read_text(path, limits.yaml_bytes, "YAML file"), str(path), limits)


# ------------------------------------------------------------------ JSON
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str) -> int:
    """Maximum bracket nesting of JSON ``text`` (strings skipped), vectorized."""
    raw = _JSON_STRING.sub(b'""', text.encode("utf-8", "replace"))
    arr = np.frombuffer(raw, dtype=np.uint8)
    step = np.isin(arr, (ord("["), ord("{"))).astype(np.int32) - np.isin(arr, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def load_json_text(text: str, source: str, limits: Limits = LIMITS) -> Any:
    """Parse JSON with a depth bound; NaN/Infinity refused; one-line InputError."""
    depth = json_depth(text)
    if depth > limits.depth:
        raise InputError(f"not valid JSON input (nested {depth} levels; expected at most {limits.depth})",
                         source=source)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                         source=source) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not valid JSON ({exc})", source=source) from None


def load_json(path: str | os.PathLike, limits: Limits = LIMITS) -> Any:
    """Read and parse a JSON file (regular, UTF-8, at most ``limits.json_bytes``)."""
    return load_json_text(read_text(path, limits.json_bytes, "JSON file"), str(path), limits)


# ------------------------------------------------------------------ memory
def available_memory() -> int:
    """Bytes of memory this process may still use: MemAvailable (Linux), capped by ``ulimit -v``."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = 1 << 40
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            avail = min(avail, soft)
    except (ImportError, OSError, ValueError):
        pass
    return int(avail)


# ------------------------------------------------------------------ numbers
def number(value: Any, source: str | None, field: str | None, *, lo: float | None = None,
           hi: float | None = None, lo_open: bool = False, integer: bool = False, what: str | None = None):
    """``value`` if it is a finite number (an int when ``integer``) in ``[lo, hi]``; else InputError.

    ``lo_open`` makes the lower bound exclusive (``lo=0, lo_open=True``: positive).
    """
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise InputError(f"expected {what or kind}, got {value!r}", source=source, field=field)
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise InputError(f"expected a finite number, got {_short(value)}", source=source, field=field)
    low_bad = lo is not None and (value <= lo if lo_open else value < lo)
    if low_bad or (hi is not None and value > hi):
        where = _int_range(lo, hi) if integer and None not in (lo, hi) and not lo_open else _range(lo, hi, lo_open)
        raise InputError(f"expected {what or kind} in {where}, got {_short(value)}", source=source, field=field)
    return value


def _range(lo, hi, lo_open) -> str:
    left = "(" if lo_open else "["
    return f"{left}{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}]"


def _short(value) -> str:
    text = repr(value)
    unit = "digits" if isinstance(value, int) else "characters"
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} {unit})"


def bounded_int(value: Any, source: str | None, field: str | None, lo: int, hi: int, what: str | None = None) -> int:
    """An integer in ``[lo, hi]`` (convenience over :func:`number`)."""
    return number(value, source, field, lo=lo, hi=hi, integer=True, what=what)


#: Longest number read from text: int64 has 19 digits; a float's text rarely needs 30 characters.
MAX_NUMBER_CHARS = 100
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: The int64 range (seeds, ids, counts stored in int64 columns).
INT64 = (-(2**63), 2**63 - 1)


def int_text(text: Any, source: str | None, field: str | None = None, *, lo: int = INT64[0],
             hi: int = INT64[1], what: str | None = None) -> int:
    """The integer written in ``text`` (ASCII digits, optional sign, surrounding blanks), in ``[lo, hi]``.

    >>> int_text(" 42 ", "--gpus", lo=2, hi=64)
    42
    >>> int_text("\u0663", "--seed", lo=0)
    Traceback (most recent call last):
    ...
    netsim.errors.InputError: --seed: expected an integer (ASCII digits), got '\u0663'
    """
    t = str(text).strip()
    if len(t) > MAX_NUMBER_CHARS or not _INT_TEXT.fullmatch(t):
        raise InputError(f"expected {what or 'an integer'} (ASCII digits), got {_short(text)}", source=source,
                         field=field)
    value = int(t)
    if not lo <= value <= hi:
        raise InputError(f"expected {what or 'an integer'} in {_int_range(lo, hi)}, got {_short(t)}",
                         source=source, field=field)
    return value


def float_text(text: Any, source: str | None, field: str | None = None, *, lo: float | None = None,
               hi: float | None = None, lo_open: bool = False, what: str | None = None) -> float:
    """The finite number written in ``text`` (ASCII digits, a decimal point, an exponent), in range.

    >>> float_text("1e-3", "--z", lo=0)
    0.001
    >>> float_text("nan", "--z", lo=0)
    Traceback (most recent call last):
    ...
    netsim.errors.InputError: --z: expected a finite number (like 3.5 or 1e-3), got 'nan'
    """
    t = str(text).strip()
    if len(t) > MAX_NUMBER_CHARS or not _FLOAT_TEXT.fullmatch(t):
        raise InputError(f"expected {what or 'a finite number'} (like 3.5 or 1e-3), got {_short(text)}",
                         source=source, field=field)
    return number(float(t), source, field, lo=lo, hi=hi, lo_open=lo_open, what=what)


def _int_range(lo: int, hi: int) -> str:
    def fmt(v: int) -> str:
        return {INT64[1]: "2**63-1", INT64[0]: "-2**63"}.get(v, f"{v:,}")
    return f"{fmt(lo)}..{fmt(hi)}"


#: Longest file path accepted from a document (Linux PATH_MAX).
MAX_PATH_CHARS = 4096


def path_text(value: Any, source: str | None, field: str | None = None) -> str:
    """``value`` if it can name a file: a non-empty string without NUL bytes, at most 4096 characters."""
    if not isinstance(value, str) or not value:
        raise InputError(f"expected a file path, got {_short(value)}", source=source, field=field)
    if "\0" in value:
        raise InputError(f"expected a file path without NUL bytes, got {value[:80]!r}", source=source, field=field)
    if len(value) > MAX_PATH_CHARS:
        raise InputError(f"expected a file path of at most {MAX_PATH_CHARS} characters, got {len(value):,}",
                         source=source, field=field)
    return value

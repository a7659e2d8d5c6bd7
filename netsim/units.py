"""Unit parsing, formatting and exact conversions -- the only place netsim converts units.

Internally netsim keeps sizes in bytes (``int``), times in seconds (``float``)
and bandwidths in bytes per second (``float``).

Case rules
----------
* Sizes are case-insensitive.  A bare ``K``/``M``/``G``/``T`` suffix is
  *binary* (1024-based, like nccl-tests ``-b``/``-e``): ``1M`` = 1,048,576.
  ``KiB``/``MiB``/``GiB``/``TiB`` are binary too, but ``KB``/``MB``/``GB``/``TB``
  are *decimal*: ``1MB`` = 1,000,000, which differs from ``1M``!
* In bandwidths ``b`` means bits and ``B`` means bytes: ``Gb/s``, ``Gbps`` and
  ``Gbit/s`` are gigabits (400 Gbps = 50e9 B/s); ``GB/s`` and ``GBps`` are
  decimal gigabytes; ``GiB/s`` and ``GiBps`` are binary.  The prefix letter
  (K, M, G, T) is case-insensitive.
* Times accept ``ns``, ``us``, ``µs``/``μs`` (either micro sign), ``ms`` and ``s``.
* Whitespace around the value and between number and unit is ignored.

Examples
--------
>>> parse_size("1M"), parse_size("1MB")
(1048576, 1000000)
>>> parse_bandwidth("400 Gbps") == parse_bandwidth("50GB/s")
True
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import partial
from types import MappingProxyType

from netsim.errors import InputError

__all__ = ["KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "parse_size", "format_size",
           "parse_bandwidth", "format_bandwidth", "parse_time", "format_time", "time_unit", "ns_to_s", "s_to_ns",
           "s_to_ns_int", "astra_bw_to_Bps", "Bps_to_astra_bw", "astra_bw_to_bytes_per_ns", "astra_local_mem_bw_to_Bps",
           "tflops_to_flops", "Bps_to_GBps"]

KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

_NUMBER = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([^\s\d]*)\s*", re.ASCII)
_SIZE_UNITS = MappingProxyType(
    {"": 1, "b": 1}
    | {p: 1024**i for i, p in enumerate("kmgt", 1)}
    | {p + "ib": 1024**i for i, p in enumerate("kmgt", 1)}
    | {p + "b": 1000**i for i, p in enumerate("kmgt", 1)}
)
_BW_UNIT = re.compile(r"([kmgt]?)(i?)(bits?|b)(/s|ps)", re.IGNORECASE)
_TIME_UNITS = MappingProxyType({
    "ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "\u00b5s": Fraction(1, 10**6),
    "\u03bcs": Fraction(1, 10**6), "ms": Fraction(1, 10**3), "s": Fraction(1),
})
_TIME_SCALES = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))  # largest first
_SIZE_LIKE = "a size like 8, 1K, 1MiB or 1GB"
_BW_LIKE = "a bandwidth like 400Gbps, 400Gb/s, 50GB/s or 50GiB/s"
_BW_UNITS_HELP = ("bits: Kbps Mbps Gbps Tbps, Gb/s, Gbit/s; "
                  "bytes: B/s KB/s MB/s GB/s TB/s, GBps, GiB/s, GiBps")
_TIME_LIKE = "a time like 500ns, 1.5us, 2ms or 1s"
# Bounds on any number written in a size, bandwidth or time: beyond them a float under- or
# overflows (1e-400 reads as 0, 1e400 as inf), and Fraction("1e99999999") alone takes minutes.
_TINY, _HUGE = 2.2250738585072014e-308, 1e300  # _TINY: the smallest normal float64
#: Physical ranges (bytes, bytes/s, seconds).  Sizes: up to 1 PiB per message or tensor (nccl-tests
#: sweeps stop far below; 2**50 keeps byte counts exact in float64).  Bandwidths: 1 B/s to 1 PB/s
#: per link (NVLink5 is 900 GB/s per GPU).  Times: up to 1e6 s (11.6 days) per latency or delay.
MAX_SIZE = 2**50
MIN_BW, MAX_BW = 1.0, 1e15
MAX_TIME = 1e6


def _split(value: object, like: str, source: str | None,
           field: str | None) -> tuple[Fraction, str | None]:
    """Split ``value`` into an exact number and its unit (``None`` when bare)."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if is_int and abs(value) > _HUGE:
        raise InputError(f"expected {like} below {_HUGE:g}, got an integer of {len(str(abs(value)))} digits",
                         source=source, field=field)
    if is_int or isinstance(value, float) and math.isfinite(value):
        return Fraction(value), None
    match = _NUMBER.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InputError(f"expected {like}, got {value!r}", source=source, field=field)
    text = match.group(1)
    approx = float(text)  # fast, saturates: bounds the exponent before the exact Fraction
    underflow = approx == 0 and any(c in "123456789" for c in re.split("[eE]", text)[0])
    if not abs(approx) <= _HUGE or underflow or len(text) > 100:
        why = "underflows to 0" if underflow else "is too large" if len(text) <= 100 else "is too long"
        raise InputError(f"expected {like}, got {value!r} (its number {why})", source=source, field=field)
    return Fraction(text), match.group(2) or None


def _in_range(result: float, text: object, what: str, lo: float, hi: float,
              source: str | None, field: str | None) -> float:
    """``result`` if within ``[lo, hi]`` (or exactly 0 when lo is 0); else InputError."""
    if not lo <= result <= hi:
        raise InputError(f"expected {what} between {lo:g} and {hi:g}, got {text!r}", source=source, field=field)
    return result


def parse_size(text: str | int, *, source: str | None = None, field: str | None = None) -> int:
    """Parse a size such as ``8``, ``1K``, ``1MiB`` or ``1GB`` into bytes.

    Bare ``K``/``M``/``G``/``T`` (any case) are binary, as in nccl-tests;
    ``KiB``..``TiB`` are binary; ``KB``..``TB`` are decimal (``1MB`` != ``1M``).
    Fractions are allowed only when the result is a whole number of bytes.

    Parameters
    ----------
    text
        The size as a string, or a non-negative integer of bytes.
    source, field
        Where the value came from; passed to :class:`InputError`.

    Raises
    ------
    InputError
        If the size is empty, negative, fractional in bytes or has an unknown unit.

    Examples
    --------
    >>> parse_size("1G"), parse_size("1GB"), parse_size("1.5K"), parse_size(8)
    (1073741824, 1000000000, 1536, 8)
    """
    err = partial(InputError, source=source, field=field)
    number, unit = _split(text, _SIZE_LIKE, source, field)
    factor = _SIZE_UNITS.get((unit or "").lower())
    if factor is None:
        raise err(f"expected {_SIZE_LIKE}, got {text!r}")
    if number < 0:
        raise err(f"expected a non-negative size like 8, 1K, 1MiB or 1GB, got {text!r}")
    nbytes = number * factor
    if nbytes.denominator != 1:
        raise err(f"expected a whole number of bytes, got {text!r} (= {float(nbytes):g} bytes)")
    if nbytes > MAX_SIZE:
        raise err(f"expected a size of at most 1PiB (2**50 bytes), got {text!r}")
    return int(nbytes)


def _exact_str(nbytes: int, unit: int) -> str | None:
    """``nbytes / unit`` as a short exact decimal (<= 3 decimals, <= 6 digits), else None."""
    if (nbytes * 1000) % unit:
        return None
    whole, milli = divmod(nbytes * 1000 // unit, 1000)
    text = f"{whole}.{milli:03d}".rstrip("0").rstrip(".")
    return text if len(text.replace(".", "")) <= 6 else None


def format_size(nbytes: int) -> str:
    """Format a byte count compactly, preferring exact binary units.

    Tries ``TiB``..``KiB`` then ``TB``..``KB`` and uses the first unit giving an
    exact, short number (this round-trips with :func:`parse_size`).  Otherwise
    the result is approximate with two decimals in the largest binary unit.

    Examples
    --------
    >>> format_size(1048576), format_size(1536), format_size(8), format_size(10**9)
    ('1MiB', '1.5KiB', '8B', '1GB')
    >>> format_size(10**9 + 1)
    '953.67MiB'
    """
    if nbytes < 0:
        raise ValueError(f"format_size needs a non-negative byte count, got {nbytes}")
    if nbytes < 1024:
        return f"{nbytes}B"
    units = [("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB),
             ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)]
    for name, unit in units:
        if nbytes >= unit and (text := _exact_str(nbytes, unit)) is not None:
            return text + name
    name, unit = next((n, u) for n, u in units if nbytes >= u)
    return f"{nbytes / unit:.2f}{name}"


def _bw_factor(unit: str, source: str | None, field: str | None) -> Fraction:
    """Bytes per second in one ``unit`` (``b`` = bits, ``B`` = bytes)."""
    match = _BW_UNIT.fullmatch(unit)
    if match is None or (match.group(2) and not match.group(1)):
        raise InputError(f"expected a bandwidth unit ({_BW_UNITS_HELP}), got {unit!r}",
                         source=source, field=field)
    prefix, binary, kind, _ = match.groups()
    scale = (1024 if binary else 1000) ** " kmgt".index(prefix.lower() or " ")
    is_bits = kind == "b" or kind.lower().startswith("bit")
    return Fraction(scale, 8 if is_bits else 1)


def parse_bandwidth(text: str | float, *, default_unit: str | None = None,
                    source: str | None = None, field: str | None = None) -> float:
    """Parse a bandwidth such as ``400Gbps`` or ``50GB/s`` into bytes/second.

    ``b`` is bits and ``B`` is bytes (see the module docstring).  A bare number
    (string or int/float) is accepted only when ``default_unit`` is given.

    Parameters
    ----------
    text
        The bandwidth string, or a number in ``default_unit``.
    default_unit
        Unit for bare numbers, e.g. ``"GB/s"``; ``None`` makes them an error.
    source, field
        Where the value came from; passed to :class:`InputError`.

    Raises
    ------
    InputError
        On a missing or unknown unit, or a bandwidth that is not positive.

    Examples
    --------
    >>> parse_bandwidth("400Gbps"), parse_bandwidth("50GiB/s"), parse_bandwidth(25, default_unit="GB/s")
    (50000000000.0, 53687091200.0, 25000000000.0)
    """
    err = partial(InputError, source=source, field=field)
    number, unit = _split(text, _BW_LIKE, source, field)
    if unit is None and default_unit is None:
        raise err(f"expected {_BW_LIKE} (a unit is required), got {text!r}")
    factor = _bw_factor(unit if unit is not None else default_unit, source, field)
    if number <= 0:
        raise err(f"expected a positive bandwidth like 400Gbps or 50GB/s, got {text!r}")
    return _in_range(float(number * factor), text, "a bandwidth (bytes/s)", MIN_BW, MAX_BW, source, field)


def _sig(value: float, digits: int) -> str:
    """``value`` with up to ``digits`` significant digits, trailing zeros trimmed, no exponent."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_bandwidth(bps: float, unit: str = "GB/s") -> str:
    """Format bytes/second in ``unit`` with up to 4 significant digits.

    Examples
    --------
    >>> format_bandwidth(50e9), format_bandwidth(50e9, "Gbps"), format_bandwidth(50 * 2**30, "GiB/s")
    ('50 GB/s', '400 Gbps', '50 GiB/s')
    """
    return f"{_sig(bps / float(_bw_factor(unit, None, None)), 4)} {unit}"


def parse_time(text: str | float, *, default_unit: str | None = None,
               source: str | None = None, field: str | None = None) -> float:
    """Parse a time such as ``500ns``, ``1.5us``, ``2ms`` or ``1s`` into seconds.

    Zero is allowed (``0`` needs no unit); other bare numbers need
    ``default_unit`` (``"ns"``, ``"us"``, ``"ms"`` or ``"s"``).

    Parameters
    ----------
    text
        The time string, or a number in ``default_unit``.
    default_unit
        Unit for bare numbers; ``None`` makes non-zero bare numbers an error.
    source, field
        Where the value came from; passed to :class:`InputError`.

    Raises
    ------
    InputError
        On a negative time, a missing or unknown unit.

    Examples
    --------
    >>> parse_time("1.5us"), parse_time("2 ms"), parse_time(500, default_unit="ns"), parse_time("0")
    (1.5e-06, 0.002, 5e-07, 0.0)
    """
    err = partial(InputError, source=source, field=field)
    number, unit = _split(text, _TIME_LIKE, source, field)
    if number < 0:
        raise err(f"expected a non-negative time like 500ns, 1.5us, 2ms or 1s, got {text!r}")
    if unit is None:
        if number == 0:
            return 0.0
        if default_unit is None:
            raise err(f"expected {_TIME_LIKE} (a unit is required), got {text!r}")
        unit = default_unit
    factor = _TIME_UNITS.get(unit.lower())
    if factor is None:
        raise err(f"expected a time unit (ns, us, µs, ms or s), got {unit!r} in {text!r}")
    return _in_range(float(number * factor), text, "a time (seconds)", 0.0, MAX_TIME, source, field)


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit (``s``, ``ms``, ``us`` or ``ns``) and its size in seconds that puts ``seconds`` in [1, 1000)
    when possible: the unit to print a time, or an axis spanning ``seconds``, in.

    Examples
    --------
    >>> time_unit(0.6), time_unit(2.5e-5), time_unit(0)
    (('ms', 0.001), ('us', 1e-06), ('s', 1.0))
    """
    i = next((i for i, (_, size) in enumerate(_TIME_SCALES) if abs(seconds) >= size or seconds == 0), 3)
    return _TIME_SCALES[i]


def format_time(seconds: float, digits: int = 12, sep: str = "") -> str:
    """Format seconds in ns/us/ms/s so the number lies in [1, 1000) when possible.

    With the default 12 significant ``digits`` :func:`parse_time` recovers the value
    to ~1e-12; text for people uses fewer (``digits=4, sep=" "``: ``389.4 ms``).

    Examples
    --------
    >>> format_time(1.5e-6), format_time(0.25), format_time(2.0), format_time(0)
    ('1.5us', '250ms', '2s', '0s')
    >>> format_time(0.389432858, digits=4, sep=" ")
    '389.4 ms'
    """
    i = _TIME_SCALES.index(time_unit(seconds))
    if i and abs(float(f"{seconds / _TIME_SCALES[i][1]:.{digits}g}")) >= 1000:
        i -= 1  # rounding carried the number up to 1000: use the next larger unit
    return f"{seconds / _TIME_SCALES[i][1]:.{digits}g}{sep}{_TIME_SCALES[i][0]}"


def ns_to_s(ns: float) -> float:
    """Nanoseconds to seconds.

    >>> ns_to_s(1500)
    1.5e-06
    """
    return ns / 1e9


def s_to_ns(s: float) -> float:
    """Seconds to nanoseconds (float).

    >>> s_to_ns(1.5e-6)
    1500.0
    """
    return s * 1e9


def s_to_ns_int(s: float) -> int:
    """Seconds to whole nanoseconds, rounded to nearest (ties to even, like :func:`round`).

    >>> s_to_ns_int(1.0000000004), s_to_ns_int(2.6e-9)
    (1000000000, 3)
    """
    return int(round(s * 1e9))


def astra_bw_to_Bps(value_gib_per_s: float) -> float:
    """ASTRA-sim network YAML ``bandwidth`` (labelled GB/s, really GiB/s) to bytes/s.

    >>> astra_bw_to_Bps(50)
    53687091200.0
    """
    return float(value_gib_per_s * 2**30)


def Bps_to_astra_bw(bps: float) -> float:
    """Bytes/s to an ASTRA-sim network YAML ``bandwidth`` (GiB/s); inverse of :func:`astra_bw_to_Bps`.

    >>> Bps_to_astra_bw(53687091200.0)
    50.0
    """
    return float(bps) / 2**30


def astra_bw_to_bytes_per_ns(value: float) -> float:
    """ASTRA-sim's exact arithmetic for YAML ``bandwidth``: ``value * 2**30 / 1e9`` bytes/ns.

    >>> astra_bw_to_bytes_per_ns(50)
    53.6870912
    """
    return value * 2**30 / 1e9


def astra_local_mem_bw_to_Bps(value: float) -> float:
    """ASTRA-sim ``local-mem-bw`` (decimal GB/s) to bytes/s.

    >>> astra_local_mem_bw_to_Bps(1600)
    1600000000000.0
    """
    return value * 1e9


def tflops_to_flops(value: float) -> float:
    """TFLOPS (ASTRA-sim ``peak-perf``) to FLOP/s.

    >>> tflops_to_flops(989)
    989000000000000.0
    """
    return value * 1e12


def Bps_to_GBps(bps: float) -> float:
    """Bytes/s to nccl-tests GB/s (1e9 bytes/s).

    >>> Bps_to_GBps(46.5e9)
    46.5
    """
    return bps / 1e9

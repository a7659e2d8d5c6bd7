"""Tests for netsim.units: every accepted form, every error, and round trips."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netsim.errors import InputError
from netsim.units import (
    GB, KB, MB, TB, GiB, KiB, MiB, TiB,
    Bps_to_GBps, astra_bw_to_Bps, astra_bw_to_bytes_per_ns, astra_local_mem_bw_to_Bps,
    format_bandwidth, format_size, format_time, ns_to_s, parse_bandwidth, parse_size,
    parse_time, s_to_ns, s_to_ns_int, tflops_to_flops, time_unit,
)


# ---------------------------------------------------------------- sizes

@pytest.mark.parametrize("text, expected", [
    ("8", 8), ("0", 0), ("8B", 8), ("8b", 8),
    ("1K", 1024), ("1k", 1024), ("1M", 2**20), ("1m", 2**20),
    ("1G", 1073741824), ("1g", 2**30), ("1T", 2**40), ("1t", 2**40),
    ("1KiB", 1024), ("1kib", 1024), ("1MiB", 2**20), ("1GiB", 2**30), ("1TiB", 2**40),
    ("1KB", 1000), ("1kB", 1000), ("1MB", 10**6), ("1GB", 10**9), ("1TB", 10**12),
    ("1.5K", 1536), ("0.5MiB", 2**19), ("1.5GB", 1_500_000_000), ("1e3", 1000),
    (" 64 M ", 64 * 2**20), ("4 GiB", 4 * 2**30), ("\t128K\n", 128 * 1024), ("+2K", 2048),
    (".5K", 512), ("8.0", 8),
    (8, 8), (0, 0), (2**40, 2**40), (1536.0, 1536),
])
def test_parse_size_accepts(text, expected):
    result = parse_size(text)
    assert result == expected
    assert type(result) is int


def test_bare_M_differs_from_MB():
    assert parse_size("1M") == 1_048_576
    assert parse_size("1MB") == 1_000_000


@pytest.mark.parametrize("text, fragment", [
    ("1X", "expected a size like 8, 1K, 1MiB or 1GB"),
    ("", "expected a size like"),
    ("   ", "expected a size like"),
    ("K", "expected a size like"),
    ("1 K iB", "expected a size like"),
    ("1.2.3", "expected a size like"),
    ("1Ki", "expected a size like"),
    ("1PB", "expected a size like"),
    ("-1", "expected a non-negative size"),
    ("-1K", "expected a non-negative size"),
    (-5, "expected a non-negative size"),
    ("0.3B", "expected a whole number of bytes"),
    ("0.3", "expected a whole number of bytes"),
    ("1.0001K", "expected a whole number of bytes"),
    (0.5, "expected a whole number of bytes"),
    (True, "expected a size like"),
    (None, "expected a size like"),
    (float("nan"), "expected a size like"),
    ([1], "expected a size like"),
])
def test_parse_size_rejects(text, fragment):
    with pytest.raises(InputError) as info:
        parse_size(text)
    assert fragment in str(info.value)


def test_parse_size_error_message_exact():
    with pytest.raises(InputError) as info:
        parse_size("1X")
    assert "got '1X'" in str(info.value)


def test_parse_size_error_names_source_and_field():
    with pytest.raises(InputError) as info:
        parse_size("1X", source="--begin", field="size")
    err = info.value
    assert err.source == "--begin" and err.field == "size"
    assert str(err).startswith("--begin: size: expected a size like")
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("nbytes, expected", [
    (0, "0B"), (8, "8B"), (1023, "1023B"), (1024, "1KiB"), (1536, "1.5KiB"),
    (1048576, "1MiB"), (3 * 2**29, "1.5GiB"), (2**40, "1TiB"), (5 * 2**40, "5TiB"),
    (1025 * 2**20, "1025MiB"), (10**9, "1GB"), (1500 * 10**6, "1.5GB"), (10**12, "1TB"),
    (1025, "1.025KB"), (10**9 + 1, "953.67MiB"), (3 * 2**20 + 1, "3.00MiB"),
])
def test_format_size(nbytes, expected):
    assert format_size(nbytes) == expected


@given(st.integers(1, 1023), st.integers(0, 40))
def test_format_size_round_trips_power_of_two_multiples(k, e):
    nbytes = k * 2**e
    assert parse_size(format_size(nbytes)) == nbytes


@given(st.integers(0, 10**15))
def test_format_size_is_exact_or_close(nbytes):
    text = format_size(nbytes)
    number, unit = re.fullmatch(r"([\d.]+)([A-Za-z]+)", text).groups()
    if re.fullmatch(r"\d+\.\d\d", number):  # approximate form: two decimals, within 1%
        assert abs(float(number) * parse_size("1" + unit) - nbytes) <= 0.01 * nbytes
    else:
        assert parse_size(text) == nbytes


# ---------------------------------------------------------------- bandwidth

@pytest.mark.parametrize("text, expected", [
    ("400Gbps", 50e9), ("400Gb/s", 50e9), ("400 Gbit/s", 50e9), ("400gbps", 50e9),
    ("400 Gbits/s", 50e9), ("400GBit/s", 50e9),
    ("100Mbps", 12.5e6), ("1.6Tbps", 200e9), ("8Kbps", 1000.0), ("8kb/s", 1000.0),
    ("8bps", 1.0), ("8b/s", 1.0),
    ("50GB/s", 50e9), ("50GBps", 50e9), ("50 GB/s", 50e9), ("50gB/s", 50e9), ("50GB/S", 50e9),
    ("50GiB/s", 50 * 2**30), ("50GiBps", 50 * 2**30), ("50 giB/s", 50 * 2**30), ("8Gib/s", 2**30),
    ("900MB/s", 900e6), ("3.2TB/s", 3.2e12), ("2MiB/s", 2 * 2**20), ("1TiB/s", 2**40),
    ("5KB/s", 5000.0), ("5kB/s", 5000.0), ("5KiB/s", 5120.0), ("7B/s", 7.0), ("7Bps", 7.0),
    ("  25 GB/s  ", 25e9), ("1e2GB/s", 100e9),
])
def test_parse_bandwidth_accepts(text, expected):
    result = parse_bandwidth(text)
    assert result == expected
    assert isinstance(result, float)


def test_bits_vs_bytes_case():
    assert parse_bandwidth("8Gb/s") == parse_bandwidth("1GB/s") == 1e9
    assert parse_bandwidth("8Gbps") == parse_bandwidth("1GBps") == 1e9


@pytest.mark.parametrize("value, unit, expected", [
    ("50", "GB/s", 50e9), (50, "GB/s", 50e9), (12.5, "GB/s", 12.5e9), ("400", "Gbps", 50e9),
    (50, "GiB/s", 50 * 2**30), ("400Gbps", "GB/s", 50e9),
])
def test_parse_bandwidth_default_unit(value, unit, expected):
    assert parse_bandwidth(value, default_unit=unit) == expected


@pytest.mark.parametrize("value, kwargs, fragment", [
    ("50", {}, "a unit is required"),
    (50, {}, "a unit is required"),
    ("0GB/s", {}, "expected a positive bandwidth"),
    ("-1Gbps", {}, "expected a positive bandwidth"),
    (0, {"default_unit": "GB/s"}, "expected a positive bandwidth"),
    (-3.0, {"default_unit": "GB/s"}, "expected a positive bandwidth"),
    ("50GX/s", {}, "Gbps"),
    ("50 furlongs", {}, "expected a bandwidth unit"),
    ("50GB", {}, "expected a bandwidth unit"),
    ("50iB/s", {}, "expected a bandwidth unit"),
    ("50", {"default_unit": "parsecs"}, "expected a bandwidth unit"),
    ("", {}, "expected a bandwidth like"),
    ("fast", {}, "expected a bandwidth like"),
    (None, {}, "expected a bandwidth like"),
    (float("inf"), {"default_unit": "GB/s"}, "expected a bandwidth like"),
])
def test_parse_bandwidth_rejects(value, kwargs, fragment):
    with pytest.raises(InputError) as info:
        parse_bandwidth(value, **kwargs)
    assert fragment in str(info.value)


def test_parse_bandwidth_unknown_unit_lists_accepted_units():
    with pytest.raises(InputError) as info:
        parse_bandwidth("50GX/s", source="topo.yaml", field="tiers[0].bw")
    message = str(info.value)
    assert message.startswith("topo.yaml: tiers[0].bw: expected a bandwidth unit")
    for unit in ("Gbps", "Gb/s", "GB/s", "GiB/s", "MB/s", "TB/s", "B/s"):
        assert unit in message


def test_parse_bandwidth_zero_names_source_and_field():
    with pytest.raises(InputError) as info:
        parse_bandwidth("0Gbps", source="topo.yaml", field="links.bw")
    assert info.value.source == "topo.yaml" and info.value.field == "links.bw"
    assert "positive bandwidth" in info.value.message


@pytest.mark.parametrize("bps, unit, expected", [
    (50e9, "GB/s", "50 GB/s"), (50e9, "Gbps", "400 Gbps"), (50 * 2**30, "GiB/s", "50 GiB/s"),
    (46.123456e9, "GB/s", "46.12 GB/s"), (3.2e12, "TB/s", "3.2 TB/s"), (12345e9, "GB/s", "12345 GB/s"),
    (1.5e6, "MB/s", "1.5 MB/s"), (1e5, "GB/s", "0.0001 GB/s"), (0.0, "GB/s", "0 GB/s"),
])
def test_format_bandwidth(bps, unit, expected):
    assert format_bandwidth(bps, unit) == expected


def test_format_bandwidth_default_unit_and_bad_unit():
    assert format_bandwidth(50e9) == "50 GB/s"
    with pytest.raises(InputError):
        format_bandwidth(1e9, "furlongs")


@given(st.floats(1e3, 1e15))
def test_format_bandwidth_round_trips_to_4_digits(bps):
    assert math.isclose(parse_bandwidth(format_bandwidth(bps)), bps, rel_tol=1e-3)


# ---------------------------------------------------------------- time

@pytest.mark.parametrize("text, expected", [
    ("500ns", 500e-9), ("1.5us", 1.5e-6), ("1.5\u00b5s", 1.5e-6), ("1.5\u03bcs", 1.5e-6),
    ("2ms", 2e-3), ("1s", 1.0), ("0", 0.0), ("0.0", 0.0), ("0s", 0.0), ("0ns", 0.0),
    (" 3 ms ", 3e-3), ("1.5 us", 1.5e-6), ("10NS", 10e-9), ("1e3ns", 1e-6), (0, 0.0), (0.0, 0.0),
])
def test_parse_time_accepts(text, expected):
    result = parse_time(text)
    assert result == expected
    assert isinstance(result, float)


@pytest.mark.parametrize("value, unit, expected", [
    ("500", "ns", 500e-9), (500, "ns", 500e-9), ("1.5", "us", 1.5e-6), (2, "ms", 2e-3),
    (1.25, "s", 1.25), ("3us", "ns", 3e-6),
])
def test_parse_time_default_unit(value, unit, expected):
    assert parse_time(value, default_unit=unit) == expected


@pytest.mark.parametrize("value, kwargs, fragment", [
    ("-1us", {}, "expected a non-negative time"),
    (-1, {"default_unit": "s"}, "expected a non-negative time"),
    ("5", {}, "a unit is required"),
    (5, {}, "a unit is required"),
    ("5min", {}, "expected a time unit (ns, us, µs, ms or s)"),
    ("5", {"default_unit": "fortnights"}, "expected a time unit"),
    ("", {}, "expected a time like 500ns, 1.5us, 2ms or 1s"),
    ("soon", {}, "expected a time like"),
    (None, {}, "expected a time like"),
    (float("nan"), {"default_unit": "s"}, "expected a time like"),
])
def test_parse_time_rejects(value, kwargs, fragment):
    with pytest.raises(InputError) as info:
        parse_time(value, **kwargs)
    assert fragment in str(info.value)


def test_parse_time_error_names_source_and_field():
    with pytest.raises(InputError) as info:
        parse_time("-2ms", source="net.yml", field="latency")
    assert str(info.value).startswith("net.yml: latency: expected a non-negative time")


@pytest.mark.parametrize("seconds, expected", [
    (1.5e-6, "1.5us"), (500e-9, "500ns"), (2e-3, "2ms"), (1.0, "1s"), (0.25, "250ms"),
    (0, "0s"), (3600.0, "3600s"), (5e-10, "0.5ns"), (999e-9, "999ns"), (1e-6, "1us"),
    (0.9999999999999, "1s"),
])
def test_format_time(seconds, expected):
    assert format_time(seconds) == expected


def test_format_time_for_people():
    # notes and plots: few digits, a unit that suits the value (issue 35: "389432.858 us")
    assert format_time(0.389432858, digits=4, sep=" ") == "389.4 ms"
    assert format_time(0.99996, digits=4, sep=" ") == "1 s"  # rounding carries into the next unit
    assert format_time(2.0, digits=4, sep=" ") == "2 s" and format_time(6.4e-3, 4) == "6.4ms"
    assert [time_unit(x) for x in (600.0, 0.6, 6e-4, 6e-7, 6e-10)] == [
        ("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("ns", 1e-9)]


@given(st.floats(0, 1e6, allow_nan=False))
def test_time_round_trip(seconds):
    back = parse_time(format_time(seconds))
    assert math.isclose(back, seconds, rel_tol=1e-9, abs_tol=0.0)


@given(st.floats(1e-9, 999.0))
def test_format_time_number_in_range(seconds):
    number = float(re.match(r"[\d.e+-]+", format_time(seconds)).group())
    assert 1 <= number < 1000


# ---------------------------------------------------------------- exact helpers

def test_constants():
    assert (KB, MB, GB, TB) == (1e3, 1e6, 1e9, 1e12)
    assert (KiB, MiB, GiB, TiB) == (1024, 2**20, 2**30, 2**40)


def test_ns_conversions():
    assert ns_to_s(1500) == 1.5e-6
    assert s_to_ns(1.5e-6) == 1500.0
    assert s_to_ns_int(1.5e-6) == 1500
    assert s_to_ns_int(2.6e-9) == 3 and s_to_ns_int(2.4e-9) == 2
    assert isinstance(s_to_ns_int(1.0), int)


def test_astra_conversions():
    assert astra_bw_to_bytes_per_ns(50) == 53.6870912
    assert astra_bw_to_Bps(50) == 50 * 2**30
    assert astra_local_mem_bw_to_Bps(1600) == 1.6e12
    assert tflops_to_flops(989) == 989e12
    assert Bps_to_GBps(46.5e9) == 46.5


@given(st.floats(0.001, 1e4))
def test_astra_bw_per_ns_matches_per_second(value):
    assert math.isclose(astra_bw_to_bytes_per_ns(value) * 1e9, astra_bw_to_Bps(value), rel_tol=1e-15)


@given(st.integers(0, 10**12))
def test_ns_int_round_trip(ns):
    assert s_to_ns_int(ns_to_s(ns)) == ns

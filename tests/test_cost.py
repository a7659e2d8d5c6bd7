"""Cost and power of a topology (netsim/topology/cost.py, prices.py; issue 34 item 3): every default
line cites its source, closed forms, user files over the default, notes for what has no price, and
the runs and sweep columns."""

import json
import re

import pytest
import yaml

import netsim
from netsim.cli import main
from netsim.errors import InputError
from netsim.results.dataset import open_results
from netsim.sweep import parse_sweep, results, run_sweep
from netsim.topology.bom import bill_of_materials
from netsim.topology.builders import hgx_h100
from netsim.topology.cost import COST_COLUMNS, cost_table, fabric_cost
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.multidim import Dim, multi_dim
from netsim.topology.overrides import load_with_overrides
from netsim.topology.prices import DEFAULT_PRICES, load_prices
from netsim.topology.spec import load_topology

from conftest import TOPOLOGIES
from test_bom import SHIPPED

NDR = 50e9
SU = TOPOLOGIES / "h100-superpod-1su.yaml"
POD = TOPOLOGIES / "h100-superpod-1024.yaml"


@pytest.fixture(scope="module")
def default():
    return load_prices()


def _price(table, key):
    line = table.lines[key]
    return line.usd, line.watts


# ------------------------------------------------------------------ the shipped table
def test_every_default_line_cites_its_source():
    raw = yaml.safe_load(DEFAULT_PRICES.read_text())["lines"]
    assert len(raw) >= 20
    for key, line in raw.items():
        assert isinstance(line.get("source"), str) and line["source"].strip(), key
        assert {"match", "usd", "watts", "scope"} <= set(line), key
        if line.get("estimate"):
            assert isinstance(line.get("reason"), str) and line["reason"].strip(), f"{key}: an estimate needs a reason"
    table = load_prices()
    assert set(table.lines) == set(raw) and all(ln.source for ln in table.lines.values())


def test_every_estimate_says_what_it_is_estimated_from():
    """An ``estimate: true`` line says what its figures come from: another line of the table that it
    names in quotes (derived: parity, a share), figures it says were reported, a reseller's listing
    whose date (ISO) and address its source gives, or -- where nothing dated was found -- that its
    price is a placeholder estimated from no dated quote or listing."""
    raw = yaml.safe_load(DEFAULT_PRICES.read_text())["lines"]
    kinds = {}
    for key, line in raw.items():
        if not line.get("estimate"):
            continue
        text = f"{line['source']} {line['reason']}"
        named = {other for other in raw if other != key and f"'{other}'" in text}
        if named:
            kinds[key] = "derived"
        elif "reported" in line["reason"]:
            kinds[key] = "reported"
        elif "the price is a placeholder" in line["reason"]:
            assert "estimated from no dated quote or listing" in line["reason"], key
            kinds[key] = "placeholder"
        else:
            assert "listing" in line["reason"], \
                f"{key}: an estimate names its basis (a line, a report, a dated listing) or says it is a placeholder"
            assert re.search(r"\b20\d\d-\d\d\b", line["source"]) and "https://" in line["source"], \
                f"{key}: a listing is cited with its date (YYYY-MM) and address"
            kinds[key] = "listed"
    listed = ("switch QM9700", "nic port infiniband 400G", "cable copper DAC", "transceiver multimode 400G",
              "transceiver single-mode 400G", "cable multimode fiber", "cable single-mode fiber")
    assert all(kinds[k] == "listed" for k in listed), kinds
    assert kinds["gpu H100"] == "reported" and kinds["gpu GB200"] == "reported"
    assert kinds["switch port infiniband 400G"] == "derived" and kinds["nvlink switch tray"] == "derived"
    # no default line is a placeholder any more (issue 34: every default price line cites its source)
    assert set(kinds.values()) == {"derived", "reported", "listed"}


def test_listed_lines_equal_the_listings_they_cite(default):
    """The reseller prices a line cites (its ``source``) give its figure: the switch and NIC as
    listed, a twin-port part per 400G port as half of it, the multimode optic as the mean of the
    NIC end (a single-port module) and the switch end (half a twin-port one), the DGX per GPU."""
    raw = yaml.safe_load(DEFAULT_PRICES.read_text())["lines"]

    def cites(key, *figures):
        for f in figures:
            assert f in raw[key]["source"], (key, f)

    cites("switch QM9700", "36,000 USD", "2024-08-22")
    assert _price(default, "switch QM9700")[0] == 36_000
    cites("nic port infiniband 400G", "MCX75310AAS-NEAT): 2,188 USD", "2026-07-03")
    assert _price(default, "nic port infiniband 400G")[0] == 2_188
    cites("cable copper DAC", "299 USD", "2026-07")
    assert _price(default, "cable copper DAC")[0] == 299 / 2
    cites("transceiver multimode 400G", "at 769 USD", "at 879 / 2 USD", "(769 + 879 / 2) / 2", "2026-09-22")
    assert _price(default, "transceiver multimode 400G")[0] == (769 + 879 / 2) / 2
    cites("transceiver single-mode 400G", "MMS4X00-NS coding", "1,119 USD", "2026-09-22")
    assert _price(default, "transceiver single-mode 400G")[0] == 1_119 / 2
    cites("gpu H100", "270,000 USD", "2023-05")
    assert _price(default, "gpu H100")[0] == 270_000 / 8
    # a fiber cable is one of the four MPO-12 legs of a 30 m 48-fibre MTP-12 trunk (12 fibres a leg)
    cites("cable multimode fiber", "48-fibre MTP-12 OM4 trunk of 30 m", "1,222 USD", "1,222 / 4", "2026-09-22")
    assert _price(default, "cable multimode fiber")[0] == 1_222 / (48 // 12)
    cites("cable single-mode fiber", "48-fibre MTP-12 OS2 trunk of 30 m (APC", "769 USD", "769 / 4", "2026-09-22")
    assert _price(default, "cable single-mode fiber")[0] == 769 / (48 // 12)


POWER_BASES = ("power (typical)", "power (maximum)", "power (placeholder)")


def _power_basis(raw, key):
    """What a line's watts rest on: the basis its source marks (``power (typical)``, ``(maximum)``,
    ``(placeholder)``), ``derived`` when it names another line of the table, ``zero`` at 0 W."""
    line = raw[key]
    marked = [b for b in POWER_BASES if b in line["source"]]
    assert len(marked) <= 1, (key, marked)
    if marked:
        return marked[0].split("(")[1].rstrip(")")
    if line["watts"] == 0:
        return "zero"
    text = f"{line['source']} {line.get('reason', '')}"
    assert any(f"'{other}'" in text for other in raw if other != key), \
        f"{key}: a power figure marks its basis (typical, maximum, placeholder) or names the line it is derived from"
    return "derived"


def test_every_power_figure_says_its_basis_under_one_convention():
    """Network lines are at typical power (or a placeholder, or derived from such a line), but for the NVLink
    switch tray, whose only public figure is NVIDIA's provisioning maximum; the compute lines, outside the
    default totals, are at maximum power too (DGX datasheets publish nothing else)."""
    raw = yaml.safe_load(DEFAULT_PRICES.read_text())["lines"]
    bases = {key: _power_basis(raw, key) for key in raw}
    for key, basis in bases.items():
        if raw[key]["scope"] == "network" and key != "nvlink switch tray":
            assert basis in ("typical", "placeholder", "derived", "zero"), (key, basis)
        else:
            assert basis in ("maximum", "zero"), (key, basis)
    assert {k for k, b in bases.items() if b == "typical"} == {
        "switch QM9700", "nic port infiniband 400G", "transceiver multimode 400G", "transceiver single-mode 400G"}
    assert [k for k, b in bases.items() if b == "placeholder"] == []
    assert bases["gpu H100"] == bases["gpu A100"] == bases["gpu V100"] == bases["gpu GB200"] == "maximum"
    # the switch ports derive the QM9700's sourced figure; the NVLink switch tray is at a maximum (a
    # provisioning figure: no typical one was found), and its line says so plainly
    assert bases["switch port infiniband 400G"] == "derived"
    assert "placeholder" not in raw["switch port infiniband 400G"]["source"]
    assert bases["nvlink switch tray"] == "maximum" and "not a typical draw" in raw["nvlink switch tray"]["source"]
    assert "no typical power per tray was found" in raw["nvlink switch tray"]["reason"]


def test_power_lines_equal_the_datasheet_figures_they_cite(default):
    """Each sourced power figure is the number its cited document gives, and the line's watts follow from
    it: the ConnectX-7's typical power, the optics per 400G port (a NIC's single-port module and half a
    switch's twin-port one), the DGX systems' maximum per GPU."""
    raw = yaml.safe_load(DEFAULT_PRICES.read_text())["lines"]

    def quoted(key, pattern):
        m = re.search(pattern, raw[key]["source"])
        assert m, (key, pattern)
        return float(m.group(1).replace(",", ""))

    qm = "switch QM9700"
    typical = quoted(qm, r"power \(typical\): ([\d,]+) W, the QM9700's typical power with passive cables")
    maximum = quoted(qm, r"\(([\d,]+) W its maximum with active cables\)")  # the maximum is not used
    assert (typical, maximum) == (747, 1720)
    # both public notes quote the manual's table with these figures (one in kW)
    assert quoted(qm, r"'QM9700 ([\d.]+) with active cables") * 1e3 == maximum
    assert quoted(qm, r"with active cables \(([\d.]+) typical, passive\)") * 1e3 == typical
    assert quoted(qm, r"'(\d+) W passive / \d+ W active'") == typical and quoted(qm, r"W passive / (\d+) W active'") == maximum
    assert "https://networking-docs.nvidia.com/qm97x0hw/specifications" in raw[qm]["source"]
    assert _price(default, qm)[1] == typical == 747

    nic = "nic port infiniband 400G"
    assert quoted(nic, r"power \(typical\): ([\d.]+) W, the 'Typical power with passive cables") == 24.9
    assert "MCX75310AAS-NEAT (OPN 900-9X766-003N-SQ0)" in raw[nic]["source"]
    assert _price(default, nic)[1] == 24.9

    mm, sm = "transceiver multimode 400G", "transceiver single-mode 400G"
    sr4 = quoted(mm, r"'(\d+) Watts typical'")
    assert quoted(mm, r"and (\d+) W maximum\) for the single-port 400G SR4") == 9  # the maximum is not used
    twin_sr8 = quoted(mm, r"remain at (\d+) Watts for all configurations")
    assert (sr4, twin_sr8) == (8, 15) and "(8 + 15 / 2) / 2" in raw[mm]["source"]
    assert _price(default, mm)[1] == (sr4 + twin_sr8 / 2) / 2 == 7.75
    twin_dr8 = quoted(sm, r"remain at (\d+) Watts for all configurations")
    assert twin_dr8 == 17 and quoted(sm, r"'Class 8 \((\d+)W\) OSFP112") == twin_dr8
    assert _price(default, sm)[1] == twin_dr8 / 2
    for key in (mm, sm):
        assert "https://docs.nvidia.com/networking/display/" in raw[key]["source"], key

    systems = {"gpu H100": (r"power \(maximum\): ([\d.]+) kW system maximum", 1e3),
               "gpu A100": (r"power \(maximum\): ([\d.]+) kW system maximum", 1e3),
               "gpu V100": (r"power \(maximum\): ([\d,]+) W system maximum", 1)}
    for key, (pattern, unit) in systems.items():
        assert _price(default, key)[1] == quoted(key, pattern) * unit / 8, key
    assert "DU-09821-001_v01, May 2020" in raw["gpu A100"]["source"]
    assert quoted("gpu H100", r"([\d.]+) kW maximum input") == 10.2

    tray = "nvlink switch tray"
    rack = quoted(tray, r"power \(maximum\): ([\d,]+) W for the 9 NVLink switch trays of a GB200 NVL72 rack")
    assert rack == 11_160 and "11,160 / 9 W per tray" in raw[tray]["source"]
    assert "https://docs.nvidia.com/datacenter/dps/" in raw[tray]["source"]
    assert _price(default, tray)[1] == rack / 9 == 1_240


def test_derived_lines_follow_their_stated_derivation(default):
    """The figures the table derives from others (its sources say how) equal that derivation."""
    qm_usd, qm_w = _price(default, "switch QM9700")
    port = _price(default, "switch port infiniband 400G")
    assert port == (qm_usd / 64, qm_w / 64) == (36_000 / 64, 747 / 64)
    assert _price(default, "switch port ethernet 400G") == port
    assert _price(default, "switch port ethernet 100G") == (port[0] / 4, port[1] / 4)
    assert _price(default, "nic port ethernet 400G") == _price(default, "nic port infiniband 400G")
    nic = _price(default, "nic port ethernet 400G")
    assert _price(default, "nic port ethernet 200G") == (nic[0] / 2, nic[1] / 2)
    assert _price(default, "nic port ethernet 100G") == (nic[0] / 4, nic[1] / 4)
    mm, sm = _price(default, "transceiver multimode 400G"), _price(default, "transceiver single-mode 400G")
    assert _price(default, "transceiver multimode 200G") == (mm[0] / 2, mm[1] / 2)
    assert _price(default, "transceiver multimode 100G") == (mm[0] / 4, mm[1] / 4)
    assert _price(default, "transceiver single-mode 100G") == (sm[0] / 4, sm[1] / 4)
    # an NVL72 NVLink switch tray ends 1,296 / 9 = 144 NVLinks, priced per port like a 400G switch port;
    # its power is NVIDIA's provisioning figure for the rack's 9 trays, / 9
    tray = _price(default, "nvlink switch tray")
    assert tray == (144 * port[0], 11_160 / 9)
    assert _price(default, "gpu A100") == (199_000 / 8, 6_500 / 8)  # DGX A100 launch price, system max power
    assert _price(default, "gpu V100") == (149_000 / 8, 3_500 / 8)  # DGX-1 (V100)
    assert _price(default, "gpu H100") == (270_000 / 8, 10_200 / 8)  # DGX H100: SemiAnalysis, 10.2 kW max
    gb = _price(default, "gpu GB200")
    assert gb[0] == pytest.approx((3e6 - 9 * tray[0]) / 72, abs=0.01)
    assert gb[1] == pytest.approx((120e3 - 9 * tray[1]) / 72, abs=0.01)


def test_passive_parts_draw_no_power(default):
    for key, line in default.lines.items():
        if dict(line.match)["item"] == "cable":
            assert line.watts == 0, key


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_netsim_topo_bom_prices_every_shipped_topology(path, capsys):
    assert main(["topo", str(path), "--bom"]) == 0
    out = capsys.readouterr().out
    assert "cost and power  (network only" in out and "per GPU" in out and "note:" not in out
    assert main(["topo", str(path), "--bom", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cost = doc["cost"]
    assert cost["unpriced"] == [] and cost["total_usd"] >= 0 and cost["n_gpus"] > 0
    assert cost["usd_per_gpu"] == pytest.approx(cost["total_usd"] / cost["n_gpus"])
    rows = doc["bom"]
    assert all(r["price_key"] for r in rows if r["item"] != "gpu" and r["item"] != "scale-up domain")
    assert sum(r["usd"] for r in rows if r["counted"]) == pytest.approx(cost["total_usd"])
    assert main(["topo", str(path), "--include-gpus", "--json"]) == 0  # GPUs and servers priced too
    assert json.loads(capsys.readouterr().out)["cost"]["unpriced"] == []


# ------------------------------------------------------------------ closed forms
def test_two_tier_fat_tree_costs_count_times_price_by_hand(default):
    """4 HGX H100 (32 GPUs, 32 NIC ports), 8-port 400G InfiniBand switches: 8 leaves of 4 down and
    4 up, 4 spines; 32 NIC-leaf multimode cables and 32 leaf-spine single-mode ones, 2 optics each."""
    t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4, up_bw=NDR), Tier("spine", down=8)], nic_bw=NDR)
    p = {k: _price(default, k) for k in ("nic port infiniband 400G", "switch port infiniband 400G",
                                         "cable multimode fiber", "transceiver multimode 400G",
                                         "cable single-mode fiber", "transceiver single-mode 400G")}
    count = {"nic port infiniband 400G": 32, "switch port infiniband 400G": (8 + 4) * 8, "cable multimode fiber": 32,
             "transceiver multimode 400G": 64, "cable single-mode fiber": 32, "transceiver single-mode 400G": 64}
    usd = sum(count[k] * p[k][0] for k in count)
    w = sum(count[k] * p[k][1] for k in count)
    c = fabric_cost(t)
    assert c["total_usd"] == pytest.approx(usd, rel=1e-12) and c["total_w"] == pytest.approx(w, rel=1e-12)
    assert c["usd_per_gpu"] == pytest.approx(usd / 32, rel=1e-12) and c["w_per_gpu"] == pytest.approx(w / 32)
    table = cost_table(t)
    assert list(table.columns[-len(COST_COLUMNS):]) == list(COST_COLUMNS)
    sw = table[table["item"] == "switch"]
    assert sw["units"].tolist() == [64, 32] and set(sw["per"]) == {"port"}


def test_named_switch_model_is_priced_per_unit(default):
    """h100-superpod-1su: 8 leaf and 4 spine QM9700 at the QM9700 line, not per port."""
    qm_usd, qm_w = _price(default, "switch QM9700")
    table = cost_table(load_topology(SU)).set_index(["item", "tier"])
    assert table.loc[("switch", "leaf"), "usd"] == 8 * qm_usd and table.loc[("switch", "spine"), "w"] == 4 * qm_w
    assert table.loc[("switch", "leaf"), "price_key"] == "switch QM9700"


def test_include_gpus_adds_exactly_the_gpu_lines(default):
    for name, gpu, n in (("dgx-a100.yaml", "gpu A100", 8), ("h100-superpod-1su.yaml", "gpu H100", 256)):
        t = load_topology(TOPOLOGIES / name)
        net, both = fabric_cost(t), fabric_cost(t, include_gpus=True)
        usd, w = _price(default, gpu)
        assert both["total_usd"] - net["total_usd"] == pytest.approx(n * usd)
        assert both["total_w"] - net["total_w"] == pytest.approx(n * w)
        assert (net["scope"], both["scope"]) == ("network", "network and compute")
    assert fabric_cost(load_topology(TOPOLOGIES / "dgx-a100.yaml"))["total_usd"] == 0  # no scale-out network


# ------------------------------------------------------------------ user files
def test_doubling_the_switch_price_raises_the_total_by_the_switch_share(tmp_path, default):
    t = load_topology(POD)
    base = cost_table(t)
    share = base.loc[base["item"] == "switch", "usd"].sum()
    assert share == 48 * _price(default, "switch QM9700")[0]  # 32 leaves, 16 spines
    doubled = 2 * _price(default, "switch QM9700")[0]
    f = tmp_path / "quotes.yaml"
    f.write_text(f"lines:\n  switch QM9700:\n    usd: {doubled}\n")
    before, after = fabric_cost(t), fabric_cost(t, prices=f)
    assert after["total_usd"] - before["total_usd"] == share
    assert after["total_w"] == before["total_w"]  # watts kept from the default line
    line = load_prices(f).lines["switch QM9700"]
    assert (line.source, line.estimate, line.watts) == (str(f), False, _price(default, "switch QM9700")[1])
    assert fabric_cost(t, prices={"lines": {"switch QM9700": {"usd": doubled}}})["total_usd"] == after["total_usd"]


def test_the_cli_takes_a_price_file(tmp_path, capsys):
    f = tmp_path / "quotes.yaml"
    f.write_text("lines:\n  my leaf switch:\n    match: {item: switch, model: QM9700, tier: leaf}\n"
                 "    usd: 1\n    watts: 2\n    source: a quote\n")
    assert main(["topo", str(SU), "--prices", str(f), "--json"]) == 0
    rows = {(r["item"], r["tier"]): r for r in json.loads(capsys.readouterr().out)["bom"]}
    assert rows[("switch", "leaf")]["price_key"] == "my leaf switch" and rows[("switch", "leaf")]["usd"] == 8
    assert rows[("switch", "spine")]["price_key"] == "switch QM9700"  # the default still prices the spines


def test_a_row_without_a_price_gets_a_note_not_a_zero(tmp_path, capsys):
    t = multi_dim([Dim("Switch", 8, 50e9, 500e-9), Dim("Ring", 4, 25e9, 1e-6)])
    c = fabric_cost(t)
    assert len(c["unpriced"]) == 3 and all("no price for" in n for n in c["unpriced"])
    assert "switch (abstract) 8-port switch, tier dim0" in c["unpriced"][0]
    table = cost_table(t)
    abstract = table[table["item"] != "gpu"]
    assert abstract["usd"].isna().all() and not abstract["counted"].any()
    priced = {"lines": {"abstract switch": {"match": {"item": "switch", "kind": "abstract"}, "usd": 100, "watts": 1},
                        "abstract link": {"match": {"item": "link"}, "usd": 10, "watts": 0}}}
    c2 = fabric_cost(t, prices=priced)
    assert c2["unpriced"] == [] and c2["total_usd"] == 4 * 100 + 64 * 10


def test_unpriced_rows_print_a_note(capsys, tmp_path):
    path = tmp_path / "net.yaml"
    path.write_text("dims:\n  - {kind: Switch, npus: 8, bw: 400GB/s, latency: 500ns}\n")
    assert main(["topo", str(path), "--bom"]) == 0
    out = capsys.readouterr().out
    assert "NO PRICE" in out and "note: no price for switch (abstract) 8-port switch, tier dim0" in out


BAD = [
    ("lines: {x: {match: {item: switch}, usd: -1, watts: 0}}", "lines.x.usd", "expected a number in [0, inf], got -1"),
    ("lines: {x: {match: {item: switch}, usd: 1}}", "lines.x.watts", "new line needs"),
    ("lines: {x: {match: {colour: red}, usd: 1, watts: 1}}", "lines.x.match", "naming at least 'item'"),
    ("lines: {x: {match: {item: switch, colour: red}, usd: 1, watts: 1}}", "lines.x.match", "unknown field 'colour'"),
    ("lines: {x: {match: {item: switch}, usd: 1, watts: 1, per: rack}}", "lines.x.per", "unit, port"),
    ("lines: {x: {match: {item: switch}, usd: 1, watts: 1, estimate: true}}", "lines.x.reason", "reason"),
    ("lines: {switch QM9700: {price: 3}}", "lines.switch QM9700", "unknown field 'price'"),
    ("lines: {switch QM9700: {usd: 1, source: '  '}}", "lines.switch QM9700.source", "non-empty source"),
    ("lines: []", "lines", "non-empty mapping"),
    ("currency: EUR\nlines: {x: {usd: 1}}", "currency", "USD"),
    ("[1, 2]", None, "mapping with 'lines'"),
]


@pytest.mark.parametrize("text,field,expect", BAD)
def test_a_bad_price_file_is_one_line_naming_file_and_field(tmp_path, capsys, text, field, expect):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        load_prices(f)
    assert err.value.source == str(f) and err.value.field == field and expect in str(err.value)
    assert main(["topo", str(SU), "--bom", "--prices", str(f)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and str(f) in line and expect in line


def test_two_lines_matching_equally_are_an_error(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("lines:\n  a: {match: {item: switch, model: QM9700}, usd: 1, watts: 1}\n"
                 "  b: {match: {item: switch, model: QM9700}, usd: 2, watts: 1}\n")
    with pytest.raises(InputError, match="lines 'a' and 'b' both match"):
        fabric_cost(load_topology(SU), prices=f)
    # a user's line over a default one of the same specificity wins (no error)
    one = {"lines": {"mine": {"match": {"item": "switch", "model": "QM9700"}, "usd": 1, "watts": 1}}}
    assert fabric_cost(load_topology(SU), prices=one)["total_usd"] < fabric_cost(load_topology(SU))["total_usd"]


# ------------------------------------------------------------------ runs and sweeps
def test_bench_dataset_runs_row_records_the_cost(tmp_path):
    out = tmp_path / "d"
    assert main(["bench", "--topology", str(SU), "--op", "all_reduce", "-b", "1M", "-e", "1M", "--gpus", "16",
                 "--model", "analytical", "--quiet", "--out", str(out)]) == 0
    runs = open_results(out).runs.iloc[0]
    c = fabric_cost(load_topology(SU))
    assert runs["cost_usd"] == c["total_usd"] and runs["power_w_per_gpu"] == c["w_per_gpu"]
    assert runs["cost_unpriced"] == 0


def test_workload_runs_row_records_the_cost():
    from netsim.workload.generate.model import ModelSpec
    from netsim.workload.llmrun import simulate_llm

    tiny = ModelSpec("tiny", layers=2, hidden=2048, ffn=8192, heads=16, vocab=1000)
    res = simulate_llm(str(SU), tiny, model="analytical", tp=8, pp=1, dp=2, microbatches=1, seq=1024)
    runs = res.tables()["runs"].iloc[0]
    assert runs["cost_usd_per_gpu"] == fabric_cost(load_topology(SU))["usd_per_gpu"]


def test_a_sweep_compares_fabrics_by_cost(tmp_path):
    """Leaves at 2:1 need half the spines and half the cables above the leaves: the sweep's rows say
    how much less that costs, exactly as fabric_cost of each configuration's topology."""
    doc = {"kind": "bench", "base": {"topology": str(SU), "op": "all_reduce", "size": "1M", "model": "analytical",
                                     "gpus": 16},
           "grid": {"scale_out.tiers.0.oversubscription": [1, 2]}}
    rep = run_sweep(parse_sweep(doc), tmp_path / "out", jobs=1, progress=False)
    assert rep.failed == []
    df = results(tmp_path / "out").set_index("scale_out.tiers.0.oversubscription")
    for r in (1, 2):
        want = fabric_cost(load_with_overrides(str(SU), {"scale_out.tiers.0.oversubscription": r}))
        assert df.loc[r, "cost_usd"] == want["total_usd"] and df.loc[r, "power_w"] == want["total_w"]
    bom1, bom2 = (bill_of_materials(load_with_overrides(str(SU), {"scale_out.tiers.0.oversubscription": r}))
                  for r in (1, 2))
    assert df.loc[2, "cost_usd"] < df.loc[1, "cost_usd"]
    assert bom2["count"].sum() < bom1["count"].sum()


def test_public_api():
    t = netsim.load_topology(SU)
    assert netsim.fabric_cost(t) == fabric_cost(t) and len(netsim.cost_table(t)) == len(bill_of_materials(t))


def test_the_docs_table_of_shipped_topologies_is_what_fabric_cost_gives():
    from conftest import REPO

    text = (REPO / "docs" / "cost.md").read_text().split("## Shipped topologies", 1)[1]
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) >= 9
    per_gpu = {}
    for name, gpus, usd, usd_gpu, w_gpu in rows:
        c = fabric_cost(load_topology(TOPOLOGIES / name.strip().strip("`")))
        assert (int(gpus.replace(",", "")), int(usd.replace(",", ""))) == (c["n_gpus"], round(c["total_usd"]))
        assert (int(usd_gpu.replace(",", "")), float(w_gpu)) == (round(c["usd_per_gpu"]), round(c["w_per_gpu"], 1))
        per_gpu[name.strip().strip("`")] = c["usd_per_gpu"]
    # "The 3-tier tree costs 36 % more per GPU than the 2-tier one"
    assert round(100 * (per_gpu["studies/fat_tree_3tier.yaml"] / per_gpu["studies/fat_tree_2tier.yaml"] - 1)) == 36

"""docs/cost.md: every prose number, and how the code bears it out (the price table's figures are the
lines of ``netsim/topology/prices.yaml``, and its derivations are recomputed from their inputs)."""

from __future__ import annotations

from functools import lru_cache

from doc_claims import REPO, claims_for, topo

C = claims_for("cost.md")


@lru_cache(maxsize=None)
def _lines() -> dict:
    """The shipped table's lines, as written (the figures the page quotes)."""
    return _raw()["lines"]


def _raw() -> dict:
    import yaml

    return yaml.safe_load((REPO / "netsim/topology/prices.yaml").read_text())


def _u(key: str) -> float:
    return _lines()[key]["usd"]


def _w(key: str) -> float:
    return _lines()[key]["watts"]


def _zero_parts() -> list[float]:
    on_board = ("nvswitch chip", "nvlink on-board", "nvlink copper", "pcie switch")
    return [max(max(_u(k), _w(k)) for k in on_board)]


def _passive_cables() -> list[float]:
    return [max(_w(k) for k in _lines() if k.startswith("cable "))]


def _switch_ports() -> list[float]:
    qm = topo("h100-superpod-1su")  # its QM9700s: 64 ports
    radix = {t.radix for t in qm.facts.switch_tiers}
    assert radix == {64}, radix
    port = "switch port infiniband 400G"
    assert _u("switch port ethernet 400G") == _u(port) and _w("switch port ethernet 400G") == _w(port)
    assert _u("switch port ethernet 100G") == _u(port) / 4
    return [_u("switch QM9700") / 64, _w("switch QM9700") / 64, 64, 1]


def _row(*pairs) -> list[float]:
    return [f(k) for f, k in pairs]


def _tray() -> list[float]:
    import re

    import netsim

    port = "switch port infiniband 400G"
    per_tray = _u("nvlink switch tray") / _u(port)
    bom = netsim.cost_table(topo("gb200-nvl72")).set_index("item")["count"]
    assert bom["nvlink"] == per_tray * bom["nvlink switch tray"], (bom, per_tray)
    m = re.search(r"power \(maximum\): ([\d,]+) W for the (\d+) NVLink switch trays", _lines()["nvlink switch tray"]["source"])
    rack_w, trays = float(m.group(1).replace(",", "")), int(m.group(2))
    assert rack_w / trays == _w("nvlink switch tray") and trays == bom["nvlink switch tray"]
    return [_u("nvlink switch tray"), _w("nvlink switch tray"), per_tray, bom["nvlink"], bom["nvlink switch tray"],
            rack_w, trays]


def _fibers() -> list[float]:
    """Each fiber cable line is a quarter of the 30 m 48-fibre MTP-12 trunk its source cites: four 12-fibre
    legs at each end."""
    mm, sm = "cable multimode fiber", "cable single-mode fiber"
    trunk = r"a quarter of a (\d+)-fibre MTP-12 {} trunk of (\d+) m \({}, Type A, US Conec MTP, plenum\), ([\d,]+) USD"
    om4 = _cited(mm, trunk.format("OM4", "UPC"))
    os2 = _cited(sm, trunk.format("OS2", "APC"))
    assert om4[:2] == os2[:2] == [48, 30]
    legs = om4[0] / 12
    assert om4[2] / legs == _u(mm) and os2[2] / legs == _u(sm)
    return [_u(mm), _u(sm), *_passive_cables(), om4[1], om4[0], om4[2], os2[2]]


def _cited(key: str, pattern: str) -> list[float]:
    """The numbers of ``pattern``'s match in the line's cited source (a date, a launch price)."""
    import re

    m = re.search(pattern, _lines()[key]["source"])
    assert m, (key, pattern)
    return [float(g.replace(",", "")) for g in m.groups()]


def _gpus() -> list[float]:
    a, v = "gpu A100", "gpu V100"
    assert _cited(a, r"(\d+) May (\d{4})") == [14, 2020] and _cited(v, r"(\d+) May (\d{4})") == [10, 2017]
    assert _cited(a, r"([\d,]+) USD launch price")[0] == _u(a) * 8
    assert _cited(v, r"([\d,]+) USD launch price")[0] == _u(v) * 8
    return [_u(a), _w(a), _u(v), _w(v), _u(a) * 8, _w(a) * 8 / 1e3, _u(v) * 8, _w(v) * 8]


def _gpus_hb() -> list[float]:
    h, g = "gpu H100", "gpu GB200"
    rack_usd = _u(g) * 72 + 9 * _u("nvlink switch tray")
    rack_w = _w(g) * 72 + 9 * _w("nvlink switch tray")
    assert _cited(h, r"([\d,]+) USD, SemiAnalysis's estimate")[0] == _u(h) * 8 and "2023-05" in _lines()[h]["source"]
    return [_u(h), _w(h), _u(g), _w(g), _u(h) * 8, _w(h) * 8 / 1e3, 8, rack_usd / 1e6, rack_w / 1e3, 72]


def _said(key: str, field: str, pattern: str) -> float:
    """The number of ``pattern``'s match in the line's ``field`` (source or reason)."""
    import re

    m = re.search(pattern, _lines()[key][field])
    assert m, (key, field, pattern)
    return float(m.group(1).replace(",", ""))


def _switch() -> list[float]:
    k = "switch QM9700"
    assert _said(k, "source", r"price: ([\d,]+) USD, what the") == _u(k) and "2024-08-22" in _lines()[k]["source"]
    typical = _said(k, "source", r"power \(typical\): ([\d,]+) W, the QM9700's typical power with passive cables")
    maximum = _said(k, "source", r"\(([\d,]+) W its maximum with active cables\)")
    assert typical == _w(k)
    return [_u(k), _w(k), topo("h100-superpod-1su").facts.switch_tiers[0].radix,
            _said(k, "reason", r"NVIDIA's own at about ([\d,]+) USD"), typical, maximum]


def _nic() -> list[float]:
    k = "nic port infiniband 400G"
    assert _said(k, "source", r"MCX75310AAS-NEAT\): ([\d,]+) USD at FS.com") == _u(k)
    return [_u(k), _w(k), _said(k, "source", r"NADDOD at ([\d,]+) USD")]


def _dac() -> list[float]:
    k = "cable copper DAC"
    module = _said(k, "source", r"([\d,]+) USD for either at FS.com")
    assert module / 2 == _u(k)  # a twin-port breakout serves 2 NIC links
    return [_u(k), _w(k), 2, _said(k, "source", r"breakout DAC, (\d+) m"), module]


def _optics() -> list[float]:
    mm, sm = "transceiver multimode 400G", "transceiver single-mode 400G"
    nic_end = _said(mm, "source", r"flat top\) at ([\d,]+) USD")
    twin_sr8 = _said(mm, "source", r"finned top\) at ([\d,]+) / 2 USD")
    twin_dr8 = _said(sm, "source", r": ([\d,]+) USD at FS.com US")
    assert (nic_end + twin_sr8 / 2) / 2 == _u(mm) and twin_dr8 / 2 == _u(sm)
    # power: the NIC end's typical figure and the twin-port modules' (NVIDIA product specifications)
    sr4_w = _said(mm, "source", r"'(\d+) Watts typical'")
    sr8_w = _said(mm, "source", r"remain at (\d+) Watts")
    dr8_w = _said(sm, "source", r"remain at (\d+) Watts")
    assert (sr4_w + sr8_w / 2) / 2 == _w(mm) and dr8_w / 2 == _w(sm)
    return [_u(mm), _u(sm), _w(mm), _w(sm), nic_end, twin_sr8, twin_dr8, sr4_w, sr8_w, dr8_w]


def _doubling() -> list[float]:
    import netsim

    t = topo("h100-superpod-1024")
    base = netsim.fabric_cost(t)["total_usd"]
    doubled = netsim.fabric_cost(t, prices={"lines": {"switch QM9700": {"usd": 2 * _u("switch QM9700")}}})["total_usd"]
    table = netsim.cost_table(t)
    switches = int(table.loc[table["price_key"] == "switch QM9700", "count"].sum())
    assert doubled - base == switches * _u("switch QM9700")
    return [t.n_gpus, switches, _u("switch QM9700")]


def _half_spines() -> list[float]:
    """Leaf oversubscription 2 on a SuperPOD SU: half the spines, half the cables above the leaves,
    and the difference in cost is theirs."""
    import netsim
    from netsim.topology.overrides import load_with_overrides

    path = str(REPO / "topologies/h100-superpod-1su.yaml")
    full, half = netsim.cost_table(load_with_overrides(path)), netsim.cost_table(
        load_with_overrides(path, {"scale_out.tiers.0.oversubscription": 2}))

    def count(t, tier):
        return t.loc[t["tier"] == tier].groupby("item")["count"].sum()

    for item, n in count(full, "spine").items():
        assert count(half, "spine")[item] * 2 == n
    for item, n in count(full, "leaf-spine").items():
        assert count(half, "leaf-spine")[item] * 2 == n
    return [2]


SHIPPED = ["p4d-a100-shared-nic", "h100-superpod-1su", "h100-superpod-1024", "studies/fat_tree_2tier",
           "studies/fat_tree_3tier", "megascale-12k", "llama3-24k", "gb200-nvl72", "gb300-nvl72-2x400g"]


def _shipped_row(name: str):
    def check() -> list[float]:
        import netsim

        c = netsim.fabric_cost(topo(name))
        return [c["n_gpus"], c["total_usd"], c["usd_per_gpu"], c["w_per_gpu"]]
    return check


def _row_text(name: str) -> str:
    text = (REPO / "docs/cost.md").read_text()
    return next(line for line in text.splitlines() if line.startswith(f"| `{name}.yaml` |"))


def _three_vs_two() -> list[float]:
    import netsim

    two, three = (netsim.fabric_cost(topo(f"studies/fat_tree_{n}tier")) for n in (2, 3))
    assert two["n_gpus"] == three["n_gpus"]
    return [3, round(100 * (three["usd_per_gpu"] / two["usd_per_gpu"] - 1)), 2, two["n_gpus"]]


CLAIMS = [
    C("they are listed at 0 in the network", _zero_parts),
    C("passive cables 0 W", _passive_cables),
    C("never priced 0 silently", why="a behaviour: an unpriced row is noted and left out, not priced "
                                     "(tests/test_cost.py); 0 names the price it is not given"),
    C("| `switch QM9700` | 36,000 USD, 747 W | a 64-port 400G InfiniBand switch as the \"H100 Freakonomics\" cost "
      "sheet prices it, from an FS.com listing (archived 2024-08-22; prices as of 2024-08; it names no part number "
      "and puts NVIDIA's own at about 50,000 USD); power its typical power with passive cables (QM97x0 user manual, "
      "Specifications: 747 W typical, 1,720 W maximum with active cables", _switch),
    C("| 562.5 USD, 11.67 W per 400G port | the QM9700 line / 64 ports; Ethernet set "
      "equal to InfiniBand; 100G at 1/4", _switch_ports),
    C("| 2,188 USD, 24.9 W per 400G port | NVIDIA ConnectX-7 MCX75310AAS-NEAT at FS.com, as quoted in public notes "
      "dated 2026-07-03 and 2026-09 (NADDOD listed it at 1,599 USD)", _nic),
    C("| 149.5 USD; 0 W | half of an 800G twin-port OSFP to 2 × 400G passive breakout DAC (NVIDIA MCP7Y00 / MCP7Y10 "
      "kind, 2 m), 299 USD at FS.com", _dac),
    C("| 305.5, 192.25 USD; 0 W | passive MPO-12 cables (NVIDIA LinkX MFP7E10, MFP7E30 classes): a quarter of a 30 m "
      "48-fibre MTP-12 trunk (four MPO-12 legs at each end) at FS.com, OM4 UPC at 1,222 USD and OS2 APC at 769 USD "
      "(public notes, price summary dated 2026-09-22)", _fibers),
    C("| 604.25, 559.5 USD; 7.75, 8.5 W per port | FS.com listings of compatible modules (recorded 2026-09-22): "
      "multimode, the mean of a NIC's single-port SR4 (MMA4Z00-NS400 coding, 769 USD) and half a switch's twin-port "
      "SR8 (MMA4Z00-NS, 879 USD); single-mode, half a twin-port DR8 (MMS4X00-NS, 1,119 USD); power likewise from "
      "NVIDIA's product specifications of the Ethernet-coded modules: the SR4's 8 W typical and half the SR8's 15 W, "
      "half the DR8's 17 W", _optics),
    C("| 81,000 USD, 1,240 W | price: 144 NVLinks per GB200 NVL72 tray (1,296 on 9 trays) × the 400G switch port "
      "line; power **maximum**: 11,160 W for the 9 trays, the static NVSwitch figure NVIDIA's Dynamic Power Software "
      "runbook provisions per rack (as a public note quotes it), / 9", lambda: [*_tray(), _tray()[-1]]),
    C("fiber cables are a quarter of a listed 48-fibre trunk each", lambda: [_fibers()[4]]),
    C("| 24,875 USD, 812.5 W; 18,625 USD, 437.5 W | DGX A100 at 199,000 USD (NVIDIA, 14 May 2020) and 6.5 kW max; "
      "DGX-1 (V100) at 149,000 USD (NVIDIA, 10 May 2017) and 3,500 W", _gpus),
    C("| 33,750 USD, 1,275 W; 31,542 USD, 1,512 W | a DGX H100 at 270,000 USD with its own NICs (SemiAnalysis's "
      "estimate, 2023-05) and 10.2 kW max (datasheet), / 8; an NVL72 rack at about 3 million USD and 120 kW as "
      "reported, less its switch trays, / 72", _gpus_hb),
    C("Doubling the QM9700's price raises the 1,024-GPU fabric's total by exactly its 48 switches × 36,000", _doubling),
    C("A sweep that sets `scale_out.tiers.0.oversubscription` to 2 on a SuperPOD SU has half the spines",
      _half_spines),
    *[C(_row_text(n), _shipped_row(n)) for n in SHIPPED],
    C("The 3-tier tree costs 36 % more per GPU than the 2-tier one at the same 16,384 GPUs", _three_vs_two),
    C("`--tolerance PCT` (default 5)", lambda: [__import__("doc_claims").cli_default("sweep", "--tolerance")]),
    C("raising the price of a port of the 2-tier study fabric's unnamed 128-port switches raises each 2-tier fabric "
      "by exactly its ports times the difference, and the 3-tier fabric",
      by_test="tests/test_pareto.py::test_a_user_price_file_changes_the_answer_as_expected",
      why="the test builds the 2- and 3-tier study fabrics, prices the 128-port switch and checks both"),
]

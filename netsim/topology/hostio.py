"""How a server's GPUs reach the scale-out fabric: PCIe switches and NICs (:class:`NicLayout`).

A node's GPU reaches the fabric over PCIe, through its NIC(s), to a leaf.  Three shapes:

* **one NIC per GPU, no PCIe switch** (``NicLayout(g)``, every topology before multi-NIC
  support): GPU *i* is wired straight to NIC *i* (one PCIe link each way);
* **several NICs per GPU** (``nics_per_gpu`` k, e.g. a GB300 GPU behind a ConnectX-8 that
  exposes 2 x 400G ports): GPU *i* owns NICs ``i k .. i k + k - 1``;
* **GPUs sharing a NIC** (``gpus_per_nic`` m, e.g. AWS p4d: 8 A100 and 4 x 100G EFA):
  GPUs ``j m .. j m + m - 1`` share NIC *j*.

Whenever a NIC is not one GPU's alone (k > 1 or m > 1), or ``gpus_per_switch`` is given, the
GPUs and NICs hang off **PCIe switches**: every GPU has one PCIe link (``pcie_bw``) to its
switch, every NIC one (``nic_pcie_bw``) from it; the switch's crossbar is taken as non-blocking,
so its bandwidth is that of its ports.  Each switch holds ``gpus_per_switch`` GPUs and their NICs.

**NIC choice** (:meth:`NicLayout.local_nic`): a transfer from GPU *i* with flow key ``key`` (the
collectives pass NCCL's channel id, or the peer offset for direct all-to-all) leaves through
port ``(key + key // G) mod k`` of GPU *i*'s k NICs (G: GPUs per node).  Consecutive keys
alternate ports, as NCCL gives p2p channel c NIC ``c mod netsPerGpu`` (NCCL 2.30.7
``src/graph/topo.cc:2058-2072``, ``ncclTopoGetLocalNetType``); keys c and c + G alternate too,
as NCCL's rings do: ring channel c crosses nodes on the c-th NIC of the GPU-first preferred list
(``src/graph/search.cc:471-505``, ``ncclTopoPrefNetsGpuFirst``: for each channel, each GPU's
NIC), i.e. channels c and c + G use the same GPU's two different ports.  The receiving side uses
the same port index, so a rail-aligned flow stays on its rail.  With shared NICs every GPU of a
group uses its one NIC (NCCL: ``netsPerGpu = DIVUP(localNetCount, localGpuCount)`` = 1).

>>> lay = NicLayout(8, nics_per_gpu=2, gpus_per_switch=1)
>>> lay.nics, lay.switches, lay.local_nic(np.array([0, 0, 3]), np.array([0, 8, 1])).tolist()
(16, 8, [0, 1, 7])
>>> NicLayout(8, gpus_per_nic=2, gpus_per_switch=2).local_nic(np.arange(8), 0).tolist()
[0, 0, 1, 1, 2, 2, 3, 3]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from netsim.errors import InputError

#: PCIe signalling rate per lane (transfers/s) by generation, and the share of the line that
#: carries data after encoding.  PCI-SIG PCI Express Base Specification: Rev 3.0 8 GT/s, Rev 4.0
#: 16 GT/s, Rev 5.0 32 GT/s, all 128b/130b encoded; Rev 6.0 64 GT/s PAM4 in FLIT mode, 256-byte
#: FLITs of which 236 B TLP + 6 B DLLP (242/256) are payload-carrying.  x16 per direction:
#: Gen4 31.5, Gen5 63.0, Gen6 121.0 GB/s, as /work/shared/reference.md section 2.2 lists
#: (stas00 ml-engineering: 31, 63, 121).  TLP header overheads are not subtracted (the ``pcie``
#: efficiency, default 1.0, is where they would go).
PCIE_GTPS: dict[int, float] = {3: 8e9, 4: 16e9, 5: 32e9, 6: 64e9}
PCIE_ENCODING: dict[int, float] = {3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
PCIE_LANES: tuple[int, ...] = (1, 2, 4, 8, 16)
_PCIE_RE = re.compile(r"^\s*gen\s*([0-9]+)\s*x\s*([0-9]+)\s*$", re.IGNORECASE)


def pcie_Bps(gen: int, lanes: int = 16) -> float:
    """Bytes/s per direction of a PCIe link of generation ``gen`` and ``lanes`` lanes.

    >>> round(pcie_Bps(4) / 1e9, 2), round(pcie_Bps(5) / 1e9, 2), round(pcie_Bps(6) / 1e9, 2)
    (31.51, 63.02, 121.0)
    """
    if gen not in PCIE_GTPS:
        raise ValueError(f"PCIe generation must be one of {', '.join(map(str, PCIE_GTPS))}, got {gen}")
    if lanes not in PCIE_LANES:
        raise ValueError(f"PCIe lanes must be one of {', '.join(map(str, PCIE_LANES))}, got {lanes}")
    return PCIE_GTPS[gen] * lanes * PCIE_ENCODING[gen] / 8


def parse_pcie(text: str) -> float | None:
    """``"gen4x16"`` -> bytes/s (:func:`pcie_Bps`); ``None`` when ``text`` is not of that form."""
    m = _PCIE_RE.match(text)
    return None if m is None else pcie_Bps(int(m.group(1)), int(m.group(2)))


@dataclass(frozen=True)
class NicLayout:
    """GPUs, NICs and PCIe switches of one node (see the module docstring)."""

    #: GPUs per node.
    gpus: int
    #: NIC ports each GPU owns (k).
    nics_per_gpu: int = 1
    #: GPUs sharing one NIC (m).
    gpus_per_nic: int = 1
    #: GPUs per PCIe switch; 0: no switch, GPU i wired straight to NIC i (needs k = m = 1).
    gpus_per_switch: int = 0

    def __post_init__(self):
        k, m, s, g = self.nics_per_gpu, self.gpus_per_nic, self.gpus_per_switch, self.gpus
        if k > 1 and m > 1:
            raise ValueError("give nics_per_gpu or gpus_per_nic, not both")
        if min(k, m) < 1 or s < 0:
            raise ValueError("nics_per_gpu and gpus_per_nic must be >= 1, gpus_per_switch >= 0")
        if g % m:
            raise ValueError(f"gpus_per_nic {m} must divide the node's {g} GPUs")
        if s == 0 and (k > 1 or m > 1):
            raise ValueError("a NIC shared by GPUs, or several NICs per GPU, sit behind a PCIe switch")
        if s and (g % s or s % m):
            raise ValueError(f"gpus_per_switch {s} must divide the node's {g} GPUs and be a multiple "
                             f"of gpus_per_nic {m} (a NIC's GPUs share its switch)")

    @classmethod
    def default(cls, gpus: int, nics_per_gpu: int = 1, gpus_per_nic: int = 1,
                gpus_per_switch: int | None = None) -> "NicLayout":
        """The layout with a switch per NIC group (k NICs and their GPU, or m GPUs and their NIC)
        unless ``gpus_per_switch`` says otherwise; none when every GPU has its own NIC."""
        if gpus_per_switch is None:
            gpus_per_switch = 0 if nics_per_gpu == gpus_per_nic == 1 else gpus_per_nic
        return cls(gpus, nics_per_gpu, gpus_per_nic, gpus_per_switch)

    @property
    def nics(self) -> int:
        """NICs (ports) per node."""
        return self.gpus * self.nics_per_gpu // self.gpus_per_nic

    @property
    def switches(self) -> int:
        """PCIe switches per node (0: direct GPU-NIC links)."""
        return self.gpus // self.gpus_per_switch if self.gpus_per_switch else 0

    def local_nic(self, local_gpu: np.ndarray, key) -> np.ndarray:
        """Node-local NIC index a GPU's transfer with flow ``key`` leaves by (module docstring)."""
        local_gpu = np.asarray(local_gpu, dtype=np.int64)
        k = self.nics_per_gpu
        if k == 1:
            return local_gpu // self.gpus_per_nic
        key = np.asarray(key, dtype=np.int64)
        return local_gpu * k + np.mod(key + key // self.gpus, k)

    def nic_group(self, local_gpu: np.ndarray) -> np.ndarray:
        """The GPUs that share NICs have the same group (GPU index // gpus_per_nic)."""
        return np.asarray(local_gpu, dtype=np.int64) // self.gpus_per_nic

    def nic_switch(self, local_nic: np.ndarray) -> np.ndarray:
        """Node-local PCIe switch of each NIC."""
        first_gpu = np.asarray(local_nic, dtype=np.int64) // self.nics_per_gpu * self.gpus_per_nic
        return first_gpu // self.gpus_per_switch


def host_links(lay: NicLayout, n_nodes: int, gpu_node: np.ndarray, nic0: int, sw0: int, leaf: np.ndarray,
               leaf_latency: float, nic_bw: float, nic_lat: float, pcie_bw: float, pcie_lat: float,
               nic_pcie_bw: float, switch_lat: float):
    """Link rows (src, dst, bw, lat, kind, width lists) from GPUs through PCIe to the leaves, and
    the link-id offsets the router needs (``base``), starting at link id 0.

    No switch: GPU->NIC, NIC->GPU (``pcie``), NIC->leaf, leaf->NIC (``nic``), each over all ranks.
    With switches: GPU->switch, switch->GPU (``gpu_sw``), switch->NIC, NIC->switch (``sw_nic``),
    NIC->leaf, leaf->NIC (``nic``).  A link's latency is that of the element it enters.
    """
    H, NN = n_nodes * lay.gpus, n_nodes * lay.nics
    ranks, nics = np.arange(H, dtype=np.int64), np.arange(NN, dtype=np.int64)
    nic = nic0 + nics
    rows = {"src": [], "dst": [], "bw": [], "lat": [], "kind": [], "n": []}

    def add(a, b, bw, lat_ab, lat_ba, kind):
        rows["src"] += [a, b]
        rows["dst"] += [b, a]
        rows["bw"].append(np.full(2 * a.size, bw))
        rows["lat"].append(np.r_[np.full(a.size, lat_ab), np.full(a.size, lat_ba)])
        rows["kind"].append(kind)
        rows["n"].append(2 * a.size)

    base, nxt = {}, 0
    if lay.switches == 0:
        base["pcie"] = nxt
        add(gpu_node, nic, pcie_bw, nic_lat, pcie_lat, "pcie")
        nxt += 2 * H
    else:
        node = nics // lay.nics
        sw = sw0 + node * lay.switches + lay.nic_switch(nics % lay.nics)
        gsw = sw0 + (ranks // lay.gpus) * lay.switches + (ranks % lay.gpus) // lay.gpus_per_switch
        base["gpu_sw"] = nxt
        add(gpu_node, gsw, pcie_bw, switch_lat, pcie_lat, "pcie")
        nxt += 2 * H
        base["sw_nic"] = nxt
        add(sw, nic, nic_pcie_bw, nic_lat, switch_lat, "pcie")
        nxt += 2 * NN
    base["nic"] = nxt
    add(nic, leaf, nic_bw, leaf_latency, nic_lat, "ib")
    return rows, base


def up_down_columns(lay: NicLayout, base: dict, H: int, NN: int, s, d, ns, nd):
    """Host-side link-id columns of fabric routes: ``(up, down)`` lists of arrays, source GPU to
    its NIC's leaf link (``ns``: source NIC id) and the destination's leaf link to GPU ``d``."""
    if lay.switches == 0:
        return [base["pcie"] + s, base["nic"] + ns], [base["nic"] + NN + nd, base["pcie"] + H + d]
    up = [base["gpu_sw"] + s, base["sw_nic"] + ns, base["nic"] + ns]
    down = [base["nic"] + NN + nd, base["sw_nic"] + NN + nd, base["gpu_sw"] + H + d]
    return up, down


def parse_pcie_field(v, src: str, f: str, parse_bw) -> float:
    """A YAML bandwidth field that also takes ``genNxL`` (``gen4x16``: the PCIe specification's rate)."""
    if isinstance(v, str) and v.strip().lower().startswith("gen"):
        try:
            bw, why = parse_pcie(v), ""
        except ValueError as exc:
            bw, why = None, f" ({exc})"
        if bw is None:
            raise InputError(f"expected a bandwidth or genNxL with N in {'/'.join(map(str, PCIE_GTPS))} and L in "
                             f"{'/'.join(map(str, PCIE_LANES))} (e.g. gen5x16), got {v!r}{why}", source=src, field=f)
        return bw
    return parse_bw(v, src, f)


def nic_layout(k: int, m: int, has_switch: bool, switch_gpus: int | None, gpus: int, source: str) -> NicLayout:
    """The node's :class:`NicLayout` from ``scale_out`` fields; a bad combination names its field."""
    if k > 1 and m > 1:
        raise InputError(f"give nics_per_gpu ({k}) or gpus_per_nic ({m}), not both: a NIC is either "
                         "shared by GPUs or one of a GPU's several", source=source, field="scale_out.gpus_per_nic")
    if gpus % m:
        raise InputError(f"expected a divisor of the node's {gpus} GPUs, got {m}", source=source,
                         field="scale_out.gpus_per_nic")
    s = switch_gpus
    if s is not None and (gpus % s or s % m):
        raise InputError(f"expected a divisor of the node's {gpus} GPUs and a multiple of gpus_per_nic ({m}) "
                         f"(a NIC's GPUs share its switch), got {s}", source=source, field="scale_out.pcie_switch.gpus")
    if has_switch and s is None:
        s = m  # a switch section without a count: one switch per NIC group
    return NicLayout.default(gpus, k, m, s)

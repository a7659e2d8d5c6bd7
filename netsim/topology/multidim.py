"""ASTRA-sim style multi-dimensional networks: Ring, FullyConnected and Switch dimensions.

NPU ``r`` has coordinates ``a_d = (r // stride_d) % k_d`` with dimension 0
varying fastest (ASTRA-sim's ``translate_address``).  The NPUs that differ
only in dimension *d* form a *line* of that dimension:

* **Ring**: links ``pos -> pos+1`` (clockwise) and ``pos -> pos-1`` per NPU;
* **FullyConnected**: one link per ordered pair of the line;
* **Switch**: one switch node per line with an up and a down link per NPU.

Bandwidth is per link and direction.  Routes are dimension-ordered (lowest
dimension first, shortest ring direction, clockwise on ties); this is the
path the flow model uses.  ASTRA-sim's own congestion-unaware *timing* rule
(only the first differing dimension is charged) lives in the analytical
network, not here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim import units
from netsim.errors import InputError
from netsim.topology.facts import DimFacts, TopologyFacts
from netsim.topology.model import MAX_GPUS, MAX_LINKS, Topology, csr_from_columns, link_kind_id, node_kind_id

DIM_KINDS = ("Ring", "FullyConnected", "Switch")


@dataclass(frozen=True)
class Dim:
    """One dimension: ``kind`` in :data:`DIM_KINDS`, ``npus`` > 1, ``bw`` B/s per link, ``latency`` s per hop.

    ``astra_bw`` (GiB/s) and ``astra_latency_ns``: the values as an ASTRA-sim network YAML wrote
    them, when the dimension came from one; ASTRA-sim's integer-ns arithmetic
    (:mod:`netsim.astra_arith`) needs them exactly, and ``latency`` in seconds does not give the
    ns back bit for bit (60 ns -> 6e-08 s -> 59.99999999999999 ns).
    """

    kind: str
    npus: int
    bw: float
    latency: float
    astra_bw: float | None = None
    astra_latency_ns: float | None = None


def _lines(N: int, stride: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(line, pos) of every NPU for a dimension."""
    r = np.arange(N, dtype=np.int64)
    return (r // (stride * k)) * stride + (r % stride), (r // stride) % k


class MultiDimRouter:
    """Dimension-ordered routes; see the module docstring."""

    #: routes depend on the pair alone (see :meth:`Router.routes <netsim.topology.model.Router.routes>`)
    keyless = True

    def __init__(self, dims: list[Dim], bases: list[int]):
        self.dims, self.bases = dims, bases
        self.k = np.array([d.npus for d in dims], dtype=np.int64)
        self.stride = np.concatenate(([1], np.cumprod(self.k)[:-1])).astype(np.int64)

    def nbytes(self) -> int:
        """The router holds no tables."""
        return 0

    def routes(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None):
        """See :meth:`netsim.topology.model.Router.routes`."""
        cur = src.copy()
        cols, oks = [], []
        for d, dim in enumerate(self.dims):
            k, st = int(self.k[d]), int(self.stride[d])
            a, b = (cur // st) % k, (dst // st) % k
            line = (cur // (st * k)) * st + (cur % st)
            c, ok = self._segment(dim.kind, self.bases[d], k, line, a, b)
            cols.append(c)
            oks.append(ok)
            cur = cur + (b - a) * st
        return csr_from_columns(np.concatenate(cols, axis=1), np.concatenate(oks, axis=1))

    @staticmethod
    def _segment(kind, base, k, line, a, b):
        moving = a != b
        if kind == "Switch":
            up = base + (line * k + a) * 2
            down = base + (line * k + b) * 2 + 1
            return np.stack([up, down], 1), np.stack([moving, moving], 1)
        if kind == "FullyConnected":
            link = base + (line * k + a) * (k - 1) + np.where(b < a, b, b - 1)
            return link[:, None], moving[:, None]
        cw = (b - a) % k
        use_cw = cw <= k - cw
        hops = np.where(use_cw, cw, k - cw)
        step = np.where(use_cw, 1, -1)
        j = np.arange(k // 2, dtype=np.int64)[None, :]
        pos = (a[:, None] + step[:, None] * j) % k
        link = base + (line[:, None] * k + pos) * 2 + np.where(use_cw, 0, 1)[:, None]
        return link, j < hops[:, None]


def multi_dim(dims: list[Dim], name: str = "astra-multidim", *, astra_network: bool = False) -> Topology:
    """Build an ASTRA-sim multi-dimensional network.

    ``astra_network``: the dimensions came from an ASTRA-sim network YAML, so the analytical model
    and the collectives follow ASTRA-sim's rules (:attr:`TopologyFacts.astra_network
    <netsim.topology.facts.TopologyFacts.astra_network>`).

    >>> t = multi_dim([Dim("Ring", 4, 50e9, 500e-9)])
    >>> t.n_gpus, t.n_links, t.route(0, 3).tolist()
    (4, 8, [1])
    """
    for d in dims:
        if d.kind not in DIM_KINDS:
            raise ValueError(f"unknown dimension kind {d.kind!r}; expected one of {', '.join(DIM_KINDS)}")
        if d.npus < 2:
            raise ValueError(f"a {d.kind} dimension needs at least 2 NPUs, got {d.npus}")
    N = int(np.prod([d.npus for d in dims]))
    kinds = [np.full(N, node_kind_id("gpu"), np.int8)]
    src, dst, bw, lat, bases = [], [], [], [], []
    n_nodes, n_links, stride = N, 0, 1
    for dim in dims:
        k = dim.npus
        line, pos = _lines(N, stride, k)
        r = np.arange(N, dtype=np.int64)
        if dim.kind == "Ring":
            nxt, prv = r + (((pos + 1) % k) - pos) * stride, r + (((pos - 1) % k) - pos) * stride
            order = np.argsort(line * k + pos, kind="stable")
            s = np.repeat(r[order], 2)
            t = np.stack([nxt[order], prv[order]], 1).ravel()
        elif dim.kind == "FullyConnected":
            order = np.argsort(line * k + pos, kind="stable")
            s = np.repeat(r[order], k - 1)
            other = np.array([[q for q in range(k) if q != p] for p in range(k)], dtype=np.int64)
            t = (r[order][:, None] + (other[pos[order]] - pos[order][:, None]) * stride).ravel()
        else:
            order = np.argsort(line * k + pos, kind="stable")
            sw = n_nodes + line[order]
            s = np.stack([r[order], sw], 1).ravel()
            t = np.stack([sw, r[order]], 1).ravel()
            kinds.append(np.full(N // k, node_kind_id("switch"), np.int8))
            n_nodes += N // k
        bases.append(n_links)
        n_links += s.size
        src.append(s)
        dst.append(t)
        bw.append(np.full(s.size, dim.bw))
        lat.append(np.full(s.size, dim.latency))
        stride *= k
    L = n_links
    return Topology(
        name=name, node_kind=np.concatenate(kinds), gpus=np.arange(N, dtype=np.int32),
        link_src=np.concatenate(src).astype(np.int32), link_dst=np.concatenate(dst).astype(np.int32),
        link_bw=np.concatenate(bw), link_lat=np.concatenate(lat),
        link_kind=np.full(L, link_kind_id("link"), np.int8), link_width=np.ones(L, np.int16),
        router=MultiDimRouter(list(dims), bases), facts=_facts(dims, N, astra_network),
    )


def _facts(dims: list[Dim], N: int, astra_network: bool) -> TopologyFacts:
    """Injection and cross-section bandwidths and the diameter, per dimension kind."""
    inject, cross, diameter = [], [], 0
    for d in dims:
        k = d.npus
        per_npu = {"Ring": 2 * d.bw, "FullyConnected": (k - 1) * d.bw, "Switch": d.bw}[d.kind]
        per_line = {"Ring": 2 * d.bw, "FullyConnected": (k // 2) * (k - k // 2) * d.bw,
                    "Switch": (k // 2) * d.bw}[d.kind]
        inject.append(per_npu)
        cross.append(per_line * (N // k))
        diameter += {"Ring": k // 2, "FullyConnected": 1, "Switch": 2}[d.kind]
    return TopologyFacts(
        gpus_per_node=dims[0].npus, nodes=N // dims[0].npus, scaleup="astra_multidim", nvls=False,
        dims=tuple(DimFacts(
            d.kind, d.npus, d.bw, d.latency,
            astra_bw=d.astra_bw if d.astra_bw is not None else units.Bps_to_astra_bw(d.bw),
            astra_latency_ns=d.astra_latency_ns if d.astra_latency_ns is not None else units.s_to_ns(d.latency))
            for d in dims),
        scaleup_Bps_per_gpu=float(inject[0]), scaleout_Bps_per_gpu=float(sum(inject[1:])),
        bisection_Bps=float(min(cross)), diameter_hops=int(diameter), astra_network=astra_network,
    )


def check_dims_size(dims: list[Dim], source: str) -> None:
    """Refuse a multi-dimensional network beyond :data:`MAX_GPUS` NPUs or :data:`MAX_LINKS` links."""
    npus = math.prod(d.npus for d in dims)
    if npus > MAX_GPUS:
        raise InputError(f"{' x '.join(str(d.npus) for d in dims)} = {npus:,} NPUs; netsim handles at most "
                         f"{MAX_GPUS:,}", source=source, field="dims")
    links = sum(npus * (d.npus - 1 if d.kind == "FullyConnected" else 2) for d in dims)
    if links > MAX_LINKS:
        raise InputError(f"this network would have {links:,} links; netsim handles at most {MAX_LINKS:,}",
                         source=source, field="dims")

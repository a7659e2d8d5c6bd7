"""Multi-plane and rail-only fabrics: fat-trees side by side, joined only inside the nodes.

A fabric of ``planes`` P is P independent fat-trees of the same tiers (no cable between them).
NIC port *j* of a node (its node-local index: GPU *i*'s ports are ``i k .. i k + k - 1`` with k
NIC ports per GPU, :mod:`~netsim.topology.hostio`) sits in plane ``j mod P``; inside its plane the
node is a node of ``NICs / P`` ports, placed under the plane's leaves exactly as a one-plane
fat-tree places a node (rail-optimized or top-of-rack, :func:`~netsim.topology.fattree.rail_positions`).
Three designs:

* **multi-plane fat-tree** (DeepSeek's MPFT: "Insights into DeepSeek-V3", ISCA 2025,
  arXiv:2505.09343 §5.1: 8 GPUs and 8 × 400G InfiniBand NICs per node, "each GPU-NIC pair assigned
  to a distinct network plane", each plane a 2-tier fat-tree of 64-port 400G switches, up to
  16,384 GPUs with 768 switches; the DeepSeek-V3 technical report, arXiv:2412.19437 §3.1, describes
  the H800 cluster): ``planes: 8`` with one NIC per GPU;
* **dual-plane** (Alibaba HPN, SIGCOMM 2024: each GPU's NIC has 2 × 200G ports to two ToRs of
  different planes; ToRs of one plane reach only that plane's aggregation switches):
  ``planes: 2`` with ``nics_per_gpu: 2`` puts port 0 of every NIC in plane 0, port 1 in plane 1;
* **rail-only** ("How to Build Low-cost Networks for Large Language Models (without Sacrificing
  Performance)", Wang et al., arXiv:2307.12169: GPUs of the same rank in different high-bandwidth
  domains joined by their rail's own switches, the spine between rails removed): every NIC port of
  a node its own plane (``scale_out.kind: rail_only``, P = NIC ports per node), each rail one
  switch or, when a rail outgrows a switch, its own Clos.

**Crossing planes.**  Two planes meet only inside a node.  When a GPU's own NIC ports miss some
plane (``nics_per_gpu`` not a multiple of P: DeepSeek's planes, every rail-only fabric), a transfer
to a GPU whose NIC is in another plane first crosses NVLink to the GPU of the source node whose
NIC is in the destination's plane (the GPU with the destination's local index), then takes that
GPU's NIC: NCCL's PXN relay (``src/graph/paths.cc`` 812-840; netsim's ``pxn``), forced on because
there is no other path.  DeepEP's kernels (DeepSeek-V3 report §3.2.2) forward on the receiving
side instead (InfiniBand to the same-index GPU of the destination node, then NVLink); the bytes on
the NICs are the same, and netsim models the sending-side relay only.  The relay is cut-through: a
flow crosses the NVLink hop and the fabric at once, as NCCL's proxy pipelines it chunk by chunk,
so forwarding costs NVLink bandwidth (shared with the node's other traffic), not a store-and-forward
phase.  When every GPU's ports reach every plane (HPN: P = 2 ports per NIC) no relay is needed,
and a plane's flows meet their destination's port of the same index.

>>> plane_of(np.arange(8), 8).tolist(), plane_of(np.arange(4), 2).tolist()
([0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 0, 1])
"""

from __future__ import annotations

import numpy as np

from netsim.errors import InputError

#: Planes of one fabric: the NIC ports of a node bound it (netsim.topology.spec.MAX_NICS_PER_GPU x
#: GPUs); 1024 is far above any design (DeepSeek 8, HPN 2, rail-only 8 to 72).
MAX_PLANES = 1024


def plane_of(local_nic: np.ndarray, planes: int) -> np.ndarray:
    """Plane of each node-local NIC port index."""
    return np.asarray(local_nic, dtype=np.int64) % planes


def in_plane_ranks(n_nodes: int, nics: int, planes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per global NIC id (``node × nics + local``): its plane, its rank among its plane's NICs
    (``node × nics/P + local // P``, the order a one-plane fat-tree numbers hosts in) and the NIC
    ports per node in one plane."""
    nic = np.arange(n_nodes * nics, dtype=np.int64)
    node, local = nic // nics, nic % nics
    per_node = nics // planes
    return plane_of(local, planes), node * per_node + local // planes, per_node


def needs_relay(nics_per_gpu: int, gpus_per_nic: int, planes: int) -> bool:
    """Whether some GPU's own NIC ports miss a plane, so that crossing planes takes the NVLink relay."""
    return planes > 1 and (gpus_per_nic > 1 or nics_per_gpu % planes != 0)


def check_planes(planes: int, nics: int, relay: bool, pxn: bool | None, intra_node: str) -> None:
    """``ValueError`` when ``planes`` cannot be built on nodes of ``nics`` NIC ports, or when
    crossing planes would need a path the fabric does not have (``relay``: :func:`needs_relay`)."""
    if planes < 1 or nics % planes:
        raise ValueError(f"{planes} planes must divide the node's {nics} NIC ports")
    if relay and pxn is False:
        raise ValueError("planes meet only inside a node: crossing planes needs the NVLink relay (pxn)")
    if relay and intra_node == "nic":
        raise ValueError("intra_node nic needs every GPU's NIC ports in every plane (two planes share no switch)")


def resolve(kind: str, planes: int | None, nics: int, relay_of, pxn, rail, intra_node, source: str) -> int:
    """The planes a ``scale_out`` section asks for, checked with one-line errors naming the field.

    ``kind`` ``rail_only``: every NIC port its own plane (``planes``, when given, must say so);
    ``relay_of(P)`` is :func:`needs_relay` for the node's NIC layout.
    """
    if kind == "rail_only":
        if planes is not None and planes != nics:
            raise InputError(f"a rail-only fabric has one rail per NIC port ({nics}); got {planes}",
                             source=source, field="scale_out.planes")
        if rail is False:
            raise InputError("a rail-only fabric is rail-optimized by construction; drop it or say true",
                             source=source, field="scale_out.rail_optimized")
        planes = nics
    planes = 1 if planes is None else planes
    if nics % planes:
        raise InputError(f"expected a divisor of the node's {nics} NIC ports (each plane holds the same number "
                         f"of every node's ports), got {planes}", source=source, field="scale_out.planes")
    try:
        check_planes(planes, nics, relay_of(planes), pxn, intra_node)
    except ValueError as exc:
        raise InputError(str(exc), source=source,
                         field="scale_out.pxn" if pxn is False else "scale_out.intra_node") from None
    return planes

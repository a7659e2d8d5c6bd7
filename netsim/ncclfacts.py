"""NCCL's facts that more than one layer reads, each written once.

A leaf module (standard library only): the topology layer (host CPU vendors of a topology file,
NCCL's NVLink efficiency) and the collectives layer (NCCL's cost model, :mod:`netsim.collectives.nccl`;
its p2p engine, :mod:`netsim.collectives.p2p`) read these, so they live below both.  NCCL's
constants that only one module needs stay in that module.

Every number is NCCL 2.30.7's (tag v2.30.7-1, commit 73cf1122); "topo.h:N" is ``src/graph/topo.h``
line N of that tag (likewise ``tuning.cc``, ``device.h``, ``init.cc``).

>>> nvlink_gbps("H100"), nvlink_gbps(None), arch_of("H100"), arch_of("some future GPU")
(20.6, 20.0, 'hopper', 'hopper')
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["NCCL_VERSION", "NVLINK_GBPS", "UNKNOWN_NVLINK_GBPS", "GPU_ARCH", "DEFAULT_ARCH", "arch_of", "nvlink_gbps",
           "DEFAULT_CPU", "CPU_VENDORS", "MAXCHANNELS", "NCCL_STEPS", "DEFAULT_BUFFSIZE",
           "SIMPLE_CHUNK"]

#: The NCCL release every constant here (and in netsim.collectives.nccl / .p2p) is read from.
NCCL_VERSION = "2.30.7"

#: NCCL's NVLink bandwidth per link, GB/s per direction, by GPU architecture (topo.h:19-24:
#: ``SM70_NVLINK_BW`` / ``SM80_NVLINK_BW`` 20.0, ``SM90_NVLINK_BW`` 20.6, ``SM100_NVLINK_BW`` 40.1).
NVLINK_GBPS = MappingProxyType({"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1})
#: The per-link rate NCCL gives a GPU whose compute capability it does not list: SM80's
#: (``ncclTopoNVLinkBw``, topo.h:274-281).
UNKNOWN_NVLINK_GBPS = NVLINK_GBPS["ampere"]

#: GPU model -> NCCL compute-capability row of its tuning tables (tuning.cc:263-266).
GPU_ARCH = MappingProxyType({"V100": "volta", "A100": "ampere", "H100": "hopper", "H200": "hopper",
                             "B200": "blackwell", "GB200": "blackwell"})
#: The row netsim uses for a GPU model it does not know (the newest whose tables NCCL tunes for
#: every protocol; a modelling choice, not NCCL's).
DEFAULT_ARCH = "hopper"


def arch_of(model: str | None) -> str:
    """NCCL's architecture row of GPU ``model`` (:data:`GPU_ARCH`; unknown: :data:`DEFAULT_ARCH`)."""
    return GPU_ARCH.get(str(model), DEFAULT_ARCH)


def nvlink_gbps(model: str | None) -> float:
    """NCCL's bandwidth of one NVLink of GPU ``model``, GB/s (:data:`NVLINK_GBPS`; a model not in
    :data:`GPU_ARCH`: :data:`UNKNOWN_NVLINK_GBPS`)."""
    arch = GPU_ARCH.get(str(model))
    return NVLINK_GBPS[arch] if arch is not None else UNKNOWN_NVLINK_GBPS


#: Host CPU vendor of each GPU's usual server, used when the topology does not say (``node.cpu``):
#: DGX-1 (2x Xeon E5-2698 v4), DGX A100 (2x AMD EPYC 7742), DGX H100/H200 (2x Xeon Platinum 8480C),
#: DGX B200 (2x Xeon Platinum 8570), GB200 (Grace, Arm).  Anything else: Intel, NCCL's own default
#: row (tuning.cc:269-271 picks row 1 only for AMD or mixed) and overhead (tuning.cc:228-233).
DEFAULT_CPU = MappingProxyType({"V100": "intel", "A100": "amd", "H100": "intel", "H200": "intel",
                                "B200": "intel", "GB200": "arm"})
#: CPU vendors NCCL's tuning tells apart (tuning.cc:228-233, 269-271; ``mixed``: a job over both).
CPU_VENDORS = ("intel", "amd", "arm", "mixed")

#: ``MAXCHANNELS`` (device.h:91): channels of one communicator, ring and p2p alike.
MAXCHANNELS = 64
#: ``NCCL_STEPS`` (device.h:26): slots of a channel's buffer.
NCCL_STEPS = 8
#: ``DEFAULT_BUFFSIZE`` (init.cc:813): bytes of a channel's Simple-protocol buffer.
DEFAULT_BUFFSIZE = 1 << 22
#: A Simple-protocol step: the buffer over its ``NCCL_STEPS`` slots (512 KiB), the most a chunk
#: carries (init.cc:842-843).
SIMPLE_CHUNK = DEFAULT_BUFFSIZE // NCCL_STEPS

"""Kernel profiles: which kernels a software stack runs for one transformer layer (``--kernels``).

A training step's compute depends on the software generation as much as on the GPU: the same layer is
a few fused kernels today and a dozen separate ones in 2021.  A :class:`KernelProfile` says, for the LLM
generator (:mod:`netsim.workload.generate.layers`), how the core attention, the element-wise kernels and
the matrix multiplies are written as compute nodes; the roofline of the run's GPU then times them
(:class:`netsim.workload.compute.Roofline`).

``fa3-te`` (the default, netsim's behaviour before profiles existed): the core attention is one fused
kernel (FlashAttention: no score matrix in HBM, causal blocks skipped, op kinds ``attn_fwd`` /
``attn_bwd`` at the GPU preset's FlashAttention-3 rates); the element-wise kernels are the fused ones
of Transformer Engine / Megatron-Core (RMSNorm, rotary, SwiGLU, residual add: one read and one write of
their tensors, :meth:`~netsim.workload.generate.layers.Costs.elementwise`); each block's GEMMs are one
node at the GPU preset's best-shape GEMM efficiency.

``megatron-2021``: the kernels of Megatron-LM as it ran the SC21 weak-scaling study (Narayanan et al.,
arXiv:2104.04473, §4.2 "operator fusion": bias + GeLU, bias + dropout + add and scale + mask + softmax
fused, nothing else), read from ``megatron/model/transformer.py`` at NVIDIA/Megatron-LM de7dc40 (the
commit of ``examples/sc21``, 2021-08-10):

* core attention unfused: ``torch.baddbmm`` of Q and Kᵀ writes the full ``s x s`` scores of every head
  to HBM (line 271), the fused scale + mask + softmax reads them and writes the probabilities (line 302,
  ``FusedScaleMaskSoftmax``), ``torch.nn.Dropout`` reads those and writes its output and a one-byte mask
  per element (line 308), and ``torch.bmm`` multiplies them with V (line 332).  No causal block is
  skipped: the mask is applied to the full product, so each bmm is 2·b·s²·h/tp operations;
* element-wise: LayerNorm before attention and MLP (lines 405, 420; apex's fused kernel: reads x,
  writes y), bias + GeLU fused (line 95, ``bias_gelu_impl``: reads and writes the ffn-wide hidden state),
  bias + dropout + add fused (lines 357-379: reads x and the residual, writes the sum and a one-byte
  dropout mask), after attention and after the MLP.  The backward passes: LayerNorm reads dy and x and
  writes dx; GeLU reads dy and x and writes dx; dropout reads dy and its mask and writes dx; softmax
  reads dy and its output and writes dx;
* every GEMM is its own node (``gemm_m`` x ``gemm_n`` outputs), timed by its tiles and waves on the
  GPU's SMs (:mod:`netsim.workload.compute`, the GEMM-shape model);
* the backward's tensor-parallel all-reduce of a column-parallel layer's input gradient is synchronous:
  ``ColumnParallelLinear`` passes its input through ``copy_to_tensor_model_parallel_region``
  (``megatron/mpu/layers.py`` line 80), whose backward all-reduces the gradient after the layer's whole
  backward, weight gradient included (``megatron/mpu/mappings.py`` lines 76-89, ``_reduce``), and the next
  kernel waits for it.  The all-reduce beside the weight gradient (``fa3-te``, Megatron-Core's
  ``LinearWithGradAccumulationAndAsyncCommunication``) arrived in 2022 (Megatron-LM 83b1e42, 2022-02-13).

>>> PROFILES["megatron-2021"].attention, PROFILES["fa3-te"].attention
('unfused', 'fused')
>>> profile("fa2")
Traceback (most recent call last):
...
netsim.errors.InputError: argument: kernels: expected one of fa3-te, megatron-2021, got 'fa2'
"""

from __future__ import annotations

from dataclasses import dataclass

from netsim.errors import InputError

__all__ = ["DEFAULT", "KernelProfile", "PROFILES", "profile"]


@dataclass(frozen=True)
class KernelProfile:
    """How one software stack writes a layer's kernels (see the module docstring)."""

    name: str
    attention: str  # "fused": one FlashAttention kernel; "unfused": bmm, softmax, dropout, bmm
    elementwise: str  # "fused": Transformer Engine's kernels; "megatron-2021": LayerNorm, bias-GeLU, bias-dropout-add
    gemm_shapes: bool  # one node per GEMM with its output shape (the GEMM-shape model times it)
    async_tp_backward: bool  # the backward's TP all-reduce of the input gradient runs beside the weight gradient
    source: str


PROFILES: dict[str, KernelProfile] = {p.name: p for p in (
    KernelProfile("fa3-te", "fused", "fused", False, True,
                  "FlashAttention-3 (Shah et al., arXiv:2407.08608) and Transformer Engine's fused kernels; "
                  "netsim.topology.builders.GPU_EFFICIENCY"),
    KernelProfile("megatron-2021", "unfused", "megatron-2021", True, False,
                  "Narayanan et al. SC21 (arXiv:2104.04473) §4.2; NVIDIA/Megatron-LM de7dc40 "
                  "megatron/model/transformer.py lines 95, 271, 302, 308, 332, 357-379, 405, 420"),
)}
#: The profile a run uses unless ``--kernels`` says otherwise.
DEFAULT = "fa3-te"

#: Bytes of a dropout mask element: PyTorch's fused dropout keeps a one-byte (bool / uint8) mask per element.
DROPOUT_MASK_BYTES = 1


def profile(name: str | KernelProfile) -> KernelProfile:
    """The profile called ``name`` (a :class:`KernelProfile` passes through); InputError if unknown."""
    if isinstance(name, KernelProfile):
        return name
    found = PROFILES.get(name) if isinstance(name, str) else None
    if found is None:
        raise InputError(f"expected one of {', '.join(PROFILES)}, got {name!r}", source="argument", field="kernels")
    return found

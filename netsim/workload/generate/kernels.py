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

Beyond the layer, ``megatron-2021`` writes what Megatron-LM of 2021 did around it each step, as the SC21
scripts ran it (``examples/sc21/CONFIG.sh``: ``--fp16 --loss-scale 8192 --clip-grad 1.0``, neither
``--accumulate-allreduce-grads-in-fp32`` nor ``--use-contiguous-buffers-in-ddp``):

* gradient accumulation: every backward after a weight's first in the step adds its fresh FP16 gradient to
  ``param.grad`` in place (PyTorch's ``AccumulateGrad``, ``variable_grad += new_grad``,
  ``torch/csrc/autograd/functions/accumulate_grad.h``; read at pytorch/pytorch 035290b): reads both, writes
  one, :data:`GRAD_ACCUM_ELEMENTS` elements per weight.  Local DDP without contiguous buffers keeps no
  ``main_grad`` buffer (``megatron/model/distributed.py`` lines 124-165 at de7dc40: the hook that adds into a
  buffer exists only with ``use_contiguous_buffers``), and no GEMM accumulates into the gradient
  (``gradient_accumulation_fusion`` is not in the tree at de7dc40).  Today's stack fuses it into the
  weight-gradient GEMM (Megatron-Core's ``gradient_accumulation_fusion``), so ``fa3-te`` writes none;
* the optimizer step: ``Float16OptimizerWithFloat16Params.step`` (``megatron/optimizer/optimizer.py`` lines
  377-420 at de7dc40) over every weight the rank holds (no distributed optimizer in 2021), bytes per weight
  in :func:`fp16_optimizer_bytes`;
* pipeline sends scattered and gathered: ``--scatter-gather-tensors-in-pipeline`` is on by default
  (``megatron/arguments.py`` lines 585-587 at de7dc40, a ``store_false`` flag the scripts do not pass), so each
  TP rank sends ``1/tp`` of the activation and the receiver all-gathers it over TP
  (``megatron/p2p_communication.py`` lines 61-66, 87-94 and 133-140).

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

__all__ = ["DEFAULT", "GRAD_ACCUM_ELEMENTS", "KernelProfile", "PROFILES", "fp16_optimizer_bytes", "profile"]


@dataclass(frozen=True)
class KernelProfile:
    """How one software stack writes a layer's kernels (see the module docstring)."""

    name: str
    attention: str  # "fused": one FlashAttention kernel; "unfused": bmm, softmax, dropout, bmm
    elementwise: str  # "fused": Transformer Engine's kernels; "megatron-2021": LayerNorm, bias-GeLU, bias-dropout-add
    gemm_shapes: bool  # one node per GEMM with its output shape (the GEMM-shape model times it)
    async_tp_backward: bool  # the backward's TP all-reduce of the input gradient runs beside the weight gradient
    source: str
    grad_accumulation: bool = False  # each microbatch's weight gradient added to .grad by a separate kernel
    optimizer: bool = False  # Megatron-LM 2021's FP16 optimizer step over every weight of the rank
    pipeline_scatter_gather: bool = False  # pipeline sends of 1/tp, all-gathered over TP on arrival


PROFILES: dict[str, KernelProfile] = {p.name: p for p in (
    KernelProfile("fa3-te", "fused", "fused", False, True,
                  "FlashAttention-3 (Shah et al., arXiv:2407.08608) and Transformer Engine's fused kernels; "
                  "netsim.topology.builders.GPU_EFFICIENCY"),
    KernelProfile("megatron-2021", "unfused", "megatron-2021", True, False,
                  "Narayanan et al. SC21 (arXiv:2104.04473) §4.2; NVIDIA/Megatron-LM de7dc40 "
                  "megatron/model/transformer.py lines 95, 271, 302, 308, 332, 357-379, 405, 420; "
                  "megatron/optimizer/optimizer.py lines 377-420; megatron/p2p_communication.py lines 61-140",
                  grad_accumulation=True, optimizer=True, pipeline_scatter_gather=True),
)}
#: The profile a run uses unless ``--kernels`` says otherwise.
DEFAULT = "fa3-te"

#: Bytes of a dropout mask element: PyTorch's fused dropout keeps a one-byte (bool / uint8) mask per element.
DROPOUT_MASK_BYTES = 1

#: Elements of HBM traffic per weight of one in-place gradient accumulation, ``grad += new_grad`` (PyTorch's
#: ``AccumulateGrad``): the gradient and the fresh one read, the gradient written.
GRAD_ACCUM_ELEMENTS = 3


def fp16_optimizer_bytes(dtype_bytes: int) -> int:
    """HBM bytes per weight of one step of Megatron-LM 2021's FP16 optimizer (``megatron/optimizer/optimizer.py``
    at de7dc40; ``dtype_bytes``: the model's parameter and gradient element), pass by pass:

    * ``_copy_model_grads_to_main_grads`` (line 309 or 312): ``main_grad.float()`` reads the FP16 gradient and
      writes an FP32 one (local DDP without contiguous buffers sets ``main_grad = grad``,
      ``megatron/model/distributed.py`` line 206): ``dtype_bytes + 4``;
    * ``_unscale_main_grads_and_check_for_nan`` (line 335): ``torch._amp_foreach_non_finite_check_and_unscale_``
      reads and writes the FP32 gradient in place: 8 (the constant loss scale of ``--loss-scale 8192`` still
      takes this path: ``if self.grad_scaler``, line 388);
    * ``clip_grad_norm_fp32`` (``megatron/optimizer/clip_grads.py`` line 90): ``multi_tensor_l2norm`` reads the
      FP32 gradient: 4.  The scaling that follows runs only when the norm exceeds ``--clip-grad`` (line 113),
      which depends on the data: not counted;
    * apex ``FusedAdam`` (``megatron/optimizer/__init__.py`` line 16): ``AdamFunctor`` reads the FP32 gradient,
      weight and both moments and writes the weight and the moments (NVIDIA/apex ``csrc/multi_tensor_adam.cu``,
      read at 004da4e): 16 + 12;
    * ``_copy_main_params_to_model_params`` (lines 358-362): ``multi_tensor_scale`` reads the FP32 weight and
      writes the model's: ``4 + dtype_bytes``.

    >>> fp16_optimizer_bytes(2)
    52
    """
    fp32 = 4
    return (dtype_bytes + fp32) + 2 * fp32 + fp32 + 7 * fp32 + (fp32 + dtype_bytes)


def profile(name: str | KernelProfile) -> KernelProfile:
    """The profile called ``name`` (a :class:`KernelProfile` passes through); InputError if unknown."""
    if isinstance(name, KernelProfile):
        return name
    found = PROFILES.get(name) if isinstance(name, str) else None
    if found is None:
        raise InputError(f"expected one of {', '.join(PROFILES)}, got {name!r}", source="argument", field="kernels")
    return found

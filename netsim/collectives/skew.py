"""MoE expert load: seeded token routing, skew specs and per-pair byte matrices.

Model
-----
``n`` ranks host ``n_experts = n * experts_per_rank`` experts, placed
contiguously: expert ``e`` lives on rank ``e // experts_per_rank`` (so node
``k`` of ``local_size`` GPUs holds experts ``[k*g*epr, (k+1)*g*epr)``).  Each
rank holds ``tokens_per_rank`` tokens; every token picks ``top_k`` *distinct*
experts, drawn without replacement with probability proportional to the
expert popularity (successive sampling: each pick is proportional to the
popularity of the experts still eligible; extreme skews whose eligible mass
underflows finish with exponential race keys ``Exp(1)/p_e``, the same law).
Expert 0 is the most popular under Zipf, so rank 0 (node 0) is the hottest:
a worst-case placement, stated on purpose.

Node-limited gating (``max_nodes``, DeepSeek-V3's node-limited routing in
spirit): a token
takes experts in affinity (sampling) order and skips any expert that would
open a node beyond its ``max_nodes``-th.  DeepSeek ranks nodes by the sum of
their best affinities instead; the greedy rule has the same effect on
traffic (at most ``max_nodes`` destination nodes per token) and is cheap.

A token is sent **once per destination rank** (two of its experts on one
rank cost one copy, :func:`pair_bytes`) and, for node-limited dispatch,
**once per destination node** (:func:`node_bytes`).  Tokens a rank routes to
its own experts stay local (the diagonal); they are part of the send buffer,
as in nccl-tests alltoall, but never cross the network.

What the nccl-tests size S means here (:func:`skewed_matrix`)
-------------------------------------------------------------
S is the mean per-rank send buffer, diagonal included, exactly as for a
uniform nccl-tests alltoall (S/n to each rank including itself).  The skewed
matrix redistributes the same total ``n*S`` bytes: the bytes per token copy
(``hidden * dtype``) are set to ``n*S / copies`` where ``copies`` counts the
sampled (token, destination rank) pairs, so ``matrix.sum() == n*S`` exactly.
With ``experts_per_rank=1`` every token reaches exactly ``top_k`` ranks, so
every *row* sums to S exactly too (only columns, the receivers, are skewed).
``uniform`` is the exact nccl-tests pattern (S/n everywhere, no sampling);
``zipf:0`` samples uniform random routing instead (with sampling noise).

>>> p = zipf_popularity(4, 1.0)
>>> np.round(p, 3).tolist()
[0.48, 0.24, 0.16, 0.12]
>>> m = skewed_matrix(4, 4000, "uniform")
>>> float(m.sum()), float(m[0, 0])
(16000.0, 1000.0)
>>> m = skewed_matrix(8, 8000, "zipf:1.2", seed=1)
>>> bool(np.isclose(m.sum(), 8 * 8000)), bool(np.allclose(m.sum(axis=1), 8000))
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from netsim.errors import InputError
from netsim.shipped import resolve

__all__ = ["Skew", "MoERouting", "zipf_popularity", "route_tokens", "pair_bytes", "node_bytes",
           "parse_skew", "load_matrix", "check_matrix", "skewed_routing", "skewed_matrix"]

#: Tokens sampled per rank by :func:`skewed_matrix` / :func:`skewed_routing` by default.
DEFAULT_TOKENS = 4096
#: Tokens per batch of the exact fallback sampler (bounds memory at ~_CHUNK * n_experts floats).
_CHUNK = 1 << 15


def _arg(message: str, field: str) -> InputError:
    return InputError(message, source="argument", field=field)


def _size(v, field: str = "nbytes") -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not math.isfinite(v) or v < 0:
        raise _arg(f"expected a finite size in bytes >= 0, got {v!r}", field)
    return float(v)


def _pos_int(v, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise _arg(f"expected a positive integer, got {v!r}", field)
    return int(v)


# ------------------------------------------------------------ popularity
def zipf_popularity(n_experts: int, alpha: float) -> np.ndarray:
    """Zipf popularity ``p_e ∝ (e+1)^-alpha`` (sums to 1; ``alpha=0`` is uniform)."""
    n_experts = _pos_int(n_experts, "n_experts")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
        raise _arg(f"expected a finite Zipf exponent >= 0, got {alpha!r}", "alpha")
    w = np.arange(1, n_experts + 1, dtype=np.float64) ** -float(alpha)
    return w / w.sum()


@dataclass(frozen=True)
class Skew:
    """A parsed skew spec: ``uniform`` or ``zipf:ALPHA``."""

    kind: str = "uniform"
    alpha: float = 0.0

    def popularity(self, n_experts: int) -> np.ndarray:
        """Expert popularity (sums to 1)."""
        return zipf_popularity(n_experts, self.alpha if self.kind == "zipf" else 0.0)

    def __str__(self) -> str:
        return "uniform" if self.kind == "uniform" else f"zipf:{self.alpha:g}"


def parse_skew(text, *, source: str = "--skew") -> Skew:
    """``uniform`` or ``zipf:ALPHA`` (ALPHA >= 0, finite); case-insensitive.

    >>> parse_skew("zipf:1.2"), str(parse_skew("UNIFORM"))
    (Skew(kind='zipf', alpha=1.2), 'uniform')
    """
    if isinstance(text, Skew):
        return text
    expect = "expected 'uniform' or 'zipf:ALPHA' with ALPHA a number >= 0"
    if not isinstance(text, str):
        raise InputError(f"{expect}, got {text!r}", source=source)
    t = text.strip().lower()
    if t == "uniform":
        return Skew()
    kind, sep, value = t.partition(":")
    if kind.strip() != "zipf" or not sep:
        raise InputError(f"{expect}, got {text!r}", source=source)
    try:
        alpha = float(value)
    except ValueError:
        raise InputError(f"{expect}, got {text!r}", source=source) from None
    if not math.isfinite(alpha) or alpha < 0:
        raise InputError(f"{expect}, got {text!r}", source=source)
    return Skew("zipf", alpha)


# --------------------------------------------------------------- routing
@dataclass(frozen=True, eq=False)
class MoERouting:
    """Which experts every token goes to.

    Token ``t`` lives on rank ``t // tokens_per_rank``; ``choices[t]`` are its
    ``top_k`` distinct expert ids (most affine first); ``expert_rank[e]`` is
    the rank hosting expert ``e``; a token copy is ``bytes_per_token`` bytes.
    """

    n_ranks: int
    tokens_per_rank: int
    top_k: int
    expert_rank: np.ndarray
    choices: np.ndarray
    bytes_per_token: float = 1.0

    def __post_init__(self):
        n_tok = self.n_ranks * self.tokens_per_rank
        if self.choices.shape != (n_tok, self.top_k):
            raise _arg(f"expected choices of shape {(n_tok, self.top_k)}, got {self.choices.shape}", "choices")
        if self.choices.size and (self.choices.min() < 0 or self.choices.max() >= self.expert_rank.size):
            raise _arg(f"expected expert ids in [0, {self.expert_rank.size})", "choices")
        if self.expert_rank.size and (self.expert_rank.min() < 0 or self.expert_rank.max() >= self.n_ranks):
            raise _arg(f"expected expert ranks in [0, {self.n_ranks})", "expert_rank")
        if not (math.isfinite(self.bytes_per_token) and self.bytes_per_token >= 0):
            raise _arg(f"expected finite bytes >= 0, got {self.bytes_per_token!r}", "bytes_per_token")

    @property
    def n_experts(self) -> int:
        """Number of experts."""
        return int(self.expert_rank.size)

    def token_rank(self) -> np.ndarray:
        """Rank holding each token."""
        return np.repeat(np.arange(self.n_ranks, dtype=np.int64), self.tokens_per_rank)

    def with_bytes(self, bytes_per_token: float) -> "MoERouting":
        """The same routing with another token size."""
        return replace(self, bytes_per_token=float(bytes_per_token))


def _popularity(popularity, n_experts: int, top_k: int) -> np.ndarray:
    if popularity is None or (isinstance(popularity, str) and popularity == "uniform"):
        return np.full(n_experts, 1.0 / n_experts)
    if isinstance(popularity, (str, Skew)):
        return parse_skew(popularity, source="popularity").popularity(n_experts)
    p = np.asarray(popularity, dtype=np.float64)
    if p.shape != (n_experts,):
        raise _arg(f"expected {n_experts} expert weights, got shape {p.shape}", "popularity")
    if not np.isfinite(p).all() or (p < 0).any():
        raise _arg("expected finite expert weights >= 0", "popularity")
    if np.count_nonzero(p) < top_k:
        raise _arg(f"expected at least top_k={top_k} experts with weight > 0", "popularity")
    return p / p.sum()


def _successive(rng, p: np.ndarray, out: np.ndarray, per_node: int | None, max_nodes: int) -> np.ndarray:
    """Successive sampling, one slot at a time for all tokens: a draw ``u`` uniform on the
    eligible mass is mapped to the cumulative popularity with the excluded experts (already
    chosen, or on nodes a node-limited token may no longer open) cut out: ``y`` is the least
    fixed point of ``y = u + (excluded mass starting at or below y)``.  Returns the tokens
    left for :func:`_finish_exact` (eligible mass lost to rounding)."""
    rows, k = out.shape
    e = p.size
    cum = np.concatenate(([0.0], np.cumsum(p)))
    cum /= cum[-1]
    nodes = e // per_node if per_node else 0
    bad = np.zeros(rows, dtype=bool)
    for j in range(k):
        r = np.flatnonzero(~bad)
        chosen = out[r, :j]
        start = cum[chosen]
        mass = cum[chosen + 1] - start
        if per_node:
            used = np.zeros((r.size, nodes), dtype=bool)
            np.put_along_axis(used, chosen // per_node, True, axis=1)
            full = used.sum(axis=1) >= max_nodes
            cut = full[:, None] & ~used
            b = np.arange(nodes) * per_node
            start = np.concatenate([start, np.broadcast_to(cum[b], cut.shape)], axis=1)
            mass = np.concatenate([mass, np.where(cut, cum[b + per_node] - cum[b], 0.0)], axis=1)
        free = 1.0 - mass.sum(axis=1)
        u = rng.random(r.size) * free
        y = u
        for _ in range(start.shape[1] + 1):
            nxt = u + (mass * (start <= y[:, None])).sum(axis=1)
            if np.array_equal(nxt, y):
                break
            y = nxt
        x = np.clip(np.searchsorted(cum, y, side="right") - 1, 0, e - 1)
        ok = (free > 1e-9) & (p[x] > 0) & ~(chosen == x[:, None]).any(axis=1)
        if per_node:
            ok &= ~full | used[np.arange(r.size), x // per_node]
        out[r[ok], j] = x[ok]
        bad[r[~ok]] = True
    return np.flatnonzero(bad)


def _finish_exact(rng, p: np.ndarray, out: np.ndarray, rows: np.ndarray, node_of, max_nodes: int) -> None:
    """Complete ``rows`` with exponential race keys ``Exp(1)/p`` (robust to any skew): the
    same successive sampling, restricted to the still-eligible experts; O(experts) per slot."""
    k, e = out.shape[1], p.size
    with np.errstate(divide="ignore"):
        inv = np.where(p > 0, 1.0 / p, np.inf)
    for lo in range(0, rows.size, _CHUNK):
        r = rows[lo:lo + _CHUNK]
        keys = rng.standard_exponential((r.size, e)) * inv
        cur = out[r]
        hit = np.nonzero(cur >= 0)
        keys[hit[0], cur[hit]] = np.inf
        for slot in range(k):
            todo = np.flatnonzero(cur[:, slot] < 0)
            if not todo.size:
                continue
            kk = keys[todo]
            if node_of is not None:
                used = np.zeros((todo.size, int(node_of[-1]) + 1), dtype=bool)
                if slot:
                    np.put_along_axis(used, node_of[cur[todo, :slot]], True, axis=1)
                full = used.sum(axis=1) >= max_nodes
                kk[full[:, None] & ~used[:, node_of]] = np.inf
            j = np.argmin(kk, axis=1)
            if np.isinf(kk[np.arange(j.size), j]).any():
                raise _arg(f"fewer than top_k={k} experts with weight > 0 on max_nodes={max_nodes} nodes",
                           "max_nodes")
            cur[todo, slot] = j
            keys[todo, j] = np.inf
        out[r] = cur


def route_tokens(n_ranks: int, tokens_per_rank: int, n_experts: int, top_k: int, *,
                 popularity=None, seed: int = 0, bytes_per_token: float = 1.0,
                 local_size: int | None = None, max_nodes: int | None = None) -> MoERouting:
    """Seeded top-k routing: each token draws ``top_k`` distinct experts by popularity.

    popularity: ``None``/``'uniform'``, a skew spec (``'zipf:1.2'``/:class:`Skew`) or one
    weight per expert.  ``max_nodes`` (with ``local_size``) applies node-limited gating: a
    token's experts span at most ``max_nodes`` nodes (see the module docstring).
    """
    n = _pos_int(n_ranks, "n_ranks")
    tpr = _pos_int(tokens_per_rank, "tokens_per_rank")
    n_experts = _pos_int(n_experts, "n_experts")
    k = _pos_int(top_k, "top_k")
    if n_experts % n:
        raise _arg(f"expected a multiple of n_ranks={n} experts, got {n_experts}", "n_experts")
    if k > n_experts:
        raise _arg(f"expected top_k <= n_experts={n_experts}, got {k}", "top_k")
    p = _popularity(popularity, n_experts, k)
    epr = n_experts // n
    per_node = None
    if max_nodes is not None:
        max_nodes = _pos_int(max_nodes, "max_nodes")
        if isinstance(local_size, bool) or not isinstance(local_size, (int, np.integer)) \
                or local_size < 1 or n % local_size:
            raise _arg(f"node-limited routing needs local_size dividing n_ranks={n}, got {local_size!r}",
                       "local_size")
        g = int(local_size)
        if max_nodes < n // g:
            per_node = g * epr
    rng = np.random.default_rng(seed)
    choices = np.full((n * tpr, k), -1, dtype=np.int64)
    left = _successive(rng, p, choices, per_node, max_nodes or 0)
    if left.size:
        node_of = None if per_node is None else np.arange(n_experts, dtype=np.int64) // per_node
        _finish_exact(rng, p, choices, left, node_of, max_nodes or 0)
    expert_rank = np.arange(n_experts, dtype=np.int64) // epr
    return MoERouting(n, tpr, k, expert_rank, choices, float(bytes_per_token))


def _dedup_counts(dest: np.ndarray, src: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """``(n_rows, n_cols)`` counts of tokens per (src, distinct dest): a token's repeats count once."""
    d = np.sort(dest, axis=1)
    keep = np.ones(d.shape, dtype=bool)
    keep[:, 1:] = d[:, 1:] != d[:, :-1]
    s = np.broadcast_to(src[:, None], d.shape)[keep]
    counts = np.bincount(s * n_cols + d[keep], minlength=n_rows * n_cols)
    return counts.reshape(n_rows, n_cols).astype(np.float64)


def pair_bytes(routing: MoERouting) -> np.ndarray:
    """``(n, n)`` bytes rank i sends to rank j: one copy per token per destination *rank*."""
    n = routing.n_ranks
    counts = _dedup_counts(routing.expert_rank[routing.choices], routing.token_rank(), n, n)
    return counts * routing.bytes_per_token


def node_bytes(routing: MoERouting, local_size: int) -> np.ndarray:
    """``(n, n // local_size)`` bytes rank i sends to node m: one copy per token per *node*."""
    n, g = routing.n_ranks, _pos_int(local_size, "local_size")
    if n % g:
        raise _arg(f"expected local_size dividing n_ranks={n}, got {g}", "local_size")
    nodes = n // g
    counts = _dedup_counts(routing.expert_rank[routing.choices] // g, routing.token_rank(), n, nodes)
    return counts * routing.bytes_per_token


# ---------------------------------------------------------------- matrices
def check_matrix(matrix, n: int, *, source: str = "matrix") -> np.ndarray:
    """``matrix`` as an ``(n, n)`` float array of finite bytes >= 0, or :class:`InputError`."""
    try:
        m = np.array(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("expected a numeric matrix of bytes", source=source) from None
    if m.shape != (n, n):
        raise InputError(f"expected a {n}x{n} matrix of bytes (row i: what rank i sends to each rank), "
                         f"got shape {m.shape}", source=source, field="shape")
    bad = ~np.isfinite(m)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"expected finite bytes, got {m[i, j]}", source=source, field=f"[{i}, {j}]")
    if (m < 0).any():
        i, j = np.argwhere(m < 0)[0]
        raise InputError(f"expected bytes >= 0, got {m[i, j]:g}", source=source, field=f"[{i}, {j}]")
    return m


def load_matrix(path, n: int) -> np.ndarray:
    """Read an ``n x n`` byte matrix (row = sender) from ``.npy`` or ``.csv`` (commas, ``#`` comments)."""
    p = Path(resolve(path))
    src = str(p)
    if not p.is_file():
        raise InputError("no such file (expected an n x n byte matrix, .npy or .csv)", source=src)
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            data = np.load(p, allow_pickle=False)
        elif suffix in (".csv", ".txt"):
            data = np.loadtxt(p, delimiter=",", comments="#", ndmin=2, dtype=np.float64)
        else:
            raise InputError(f"expected a .npy or .csv file, got {suffix or 'no extension'!r}", source=src)
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        what = "a NumPy .npy array" if suffix == ".npy" else "comma-separated numbers"
        raise InputError(f"expected {what}: {exc}", source=src) from None
    if data.dtype.kind not in "biuf":
        raise InputError(f"expected a numeric array, got dtype {data.dtype}", source=src)
    return check_matrix(data, n, source=src)


def skewed_routing(n: int, nbytes: float, skew, *, top_k: int = 2, experts_per_rank: int = 1,
                   seed: int = 0, tokens_per_rank: int = DEFAULT_TOKENS, local_size: int | None = None,
                   max_nodes: int | None = None) -> MoERouting:
    """A routing whose per-rank copies total ``n * nbytes`` (token size = n*S / copies).

    ``uniform`` samples uniform random routing here (a routing must be sampled).
    """
    sk = parse_skew(skew, source="skew")
    nbytes = _size(nbytes)
    n = _pos_int(n, "n")
    n_exp = n * _pos_int(experts_per_rank, "experts_per_rank")
    r = route_tokens(n, tokens_per_rank, n_exp, top_k, popularity=sk.popularity(n_exp), seed=seed,
                     local_size=local_size, max_nodes=max_nodes)
    copies = pair_bytes(r).sum()
    return r.with_bytes(n * nbytes / copies if copies else 0.0)


def skewed_matrix(n: int, nbytes: float, skew, *, top_k: int = 2, experts_per_rank: int = 1,
                  seed: int = 0, tokens_per_rank: int = DEFAULT_TOKENS) -> np.ndarray:
    """``(n, n)`` bytes for an nccl-tests size ``nbytes`` (S) under ``skew``; sums to ``n*S``.

    See the module docstring for how S maps to tokens.  ``uniform`` is S/n everywhere.
    """
    sk = parse_skew(skew, source="skew")
    if sk.kind == "uniform":
        return np.full((_pos_int(n, "n"),) * 2, _size(nbytes) / n)
    m = pair_bytes(skewed_routing(n, nbytes, sk, top_k=top_k, experts_per_rank=experts_per_rank,
                                  seed=seed, tokens_per_rank=tokens_per_rank))
    total = m.sum()
    return m * (n * float(nbytes) / total) if total else m  # cancel rounding: exact total

"""One pipeline stage's trace, built once and stamped out for every rank of the stage.

Within a pipeline stage the generator's ranks differ in three attributes only
(:func:`~netsim.workload.generate.ranks.rank_nodes`): ``comm_src`` and ``comm_dst`` of
the point-to-point nodes (the rank itself and a peer at a fixed rank distance, so both
move with the rank) and ``pg_name`` (the rank's TP / CP / DP / EP group ids).  A
:class:`RankTemplate` is built from one rank's nodes; :meth:`RankTemplate.keys` gives
another rank's attribute tuples by shifting ``comm_src``/``comm_dst`` and renaming the
groups, so the node heads (ids, names, types, dependencies) are encoded once per stage
and each rank costs only its distinct attribute blocks and a join
(:func:`netsim.chakra.write.join_records`).  :meth:`RankTemplate.table` builds the
rank's :class:`~netsim.chakra.NodeTable` directly, equal to what reading the written
file gives (``netsim run --llm`` uses it; no bytes in between).

:meth:`RankTemplate.check` compares a rank's instantiation with the generator's own
nodes for that rank; the file writer runs it on one rank of every batch, so a change
to the generator that breaks the rule above fails loudly instead of writing wrong files.

>>> from netsim.workload.generate.model import ModelSpec
>>> from netsim.workload.generate.plan import plan_llm
>>> plan = plan_llm(ModelSpec("tiny", layers=2, hidden=256, ffn=1024, heads=4, vocab=1000),
...                 tp=2, pp=2, dp=2, microbatches=2, seq=128)
>>> t = RankTemplate.build(plan, 4)
>>> t.check(plan, 7)
>>> t.encode(7, plan.member[7], {}) == stamp_reference(plan, 7)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.chakra.model import INT_COLUMNS, MISSING, EtMetadata, EtNode, NodeTable, op_kind_codes
from netsim.chakra.schema import WRITE_MEMBERS
from netsim.chakra.write import Heads, RecordColumns, attr_key, attr_record, encode_heads, encode_node, join_records

#: Positions of comm_src, comm_dst and pg_name in an attribute key (netsim.chakra.schema.WRITE_MEMBERS order).
_SRC, _DST, _PG = 3, 4, 7
#: NodeTable column of each attribute-key position (WRITE_MEMBERS order).
_KEY_COLUMNS = ("is_cpu_op", "comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag", "comm_priority",
                "pg_name", "involved_dim", "num_ops", "tensor_size", "op_kind", "gemm_m", "gemm_n")
#: The GlobalMetadata version the generator writes (netsim.chakra.write_et's default).
VERSION = "0.0.4"


@dataclass(eq=False)
class RankTemplate:
    """The trace of rank ``rep`` with its rank-dependent attributes marked (see the module docstring)."""

    rep: int
    groups: dict[str, str]
    cols: RecordColumns  # heads' columns; cols.blocks unused (attributes vary per rank)
    keys: list[tuple[Any, ...]]  # distinct attribute keys of ``rep``, in order of first use
    heads: Heads | None = field(default=None, repr=False)
    parts: list[tuple[bytes, bytes, bytes]] | None = field(default=None, repr=False)  # see _split_block
    shared: dict[str, Any] | None = field(default=None, repr=False)  # see shared_columns
    metadata_attrs: dict[str, Any] = field(default_factory=dict)  # GlobalMetadata attributes (LLMPlan.metadata)

    @classmethod
    def build(cls, plan, rep: int) -> "RankTemplate":
        """Template from rank ``rep`` of ``plan`` (a :class:`~netsim.workload.generate.llm.LLMPlan`)."""
        tpl = cls.from_nodes(rep, plan.member[rep], plan.nodes(rep))
        tpl.metadata_attrs = dict(plan.metadata)
        return tpl

    @classmethod
    def from_nodes(cls, rep: int, groups: dict[str, str], nodes: list[EtNode]) -> "RankTemplate":
        """Template from the nodes of rank ``rep``, whose group id per kind is ``groups``."""
        n = len(nodes)
        names: dict[str, int] = {}
        keys: dict[tuple[Any, ...], int] = {}
        name_code = np.fromiter((names.setdefault(x.name, len(names)) for x in nodes), np.int64, n)
        attr = np.fromiter((keys.setdefault(attr_key(x), len(keys)) for x in nodes), np.int64, n)
        if any(x.other or x.inputs is not None for x in nodes):
            raise ValueError("generator nodes carry no extra attributes or IOInfo")
        data_ptr = np.zeros(n + 1, np.int64)
        np.cumsum([len(x.data_deps) for x in nodes], out=data_ptr[1:])
        ctrl_ptr = np.zeros(n + 1, np.int64)
        np.cumsum([len(x.ctrl_deps) for x in nodes], out=ctrl_ptr[1:])
        cols = RecordColumns(
            np.array([x.id for x in nodes], np.int64), name_code, list(names),
            np.array([int(x.type) for x in nodes], np.int64),
            (np.array([d for x in nodes for d in x.ctrl_deps], np.int64), ctrl_ptr),
            (np.array([d for x in nodes for d in x.data_deps], np.int64), data_ptr),
            np.array([x.duration_micros for x in nodes], np.int64), attr, [])
        return cls(rep, dict(groups), cols, list(keys))

    def keys_for(self, rank: int, groups: dict[str, str]) -> list[tuple[Any, ...]]:
        """Rank ``rank``'s attribute keys (same order as :attr:`keys`); ``groups``: its group id per kind."""
        shift = rank - self.rep
        rename = {self.groups[k]: groups[k] for k in self.groups}
        if shift == 0 and all(a == b for a, b in rename.items()):
            return list(self.keys)
        out = []
        for key in self.keys:
            src, dst, pg = key[_SRC], key[_DST], key[_PG]
            if src is not None or dst is not None or pg is not None:
                key = (*key[:_SRC], None if src is None else src + shift, None if dst is None else dst + shift,
                       *key[_DST + 1:_PG], rename.get(pg, pg), *key[_PG + 1:])
            out.append(key)
        return out

    def blocks(self, rank: int, groups: dict[str, str], memo: dict[Any, bytes]) -> list[bytes]:
        """Rank ``rank``'s encoded attribute blocks, one per key: ``attr_block(key, memo)`` for each
        of :meth:`keys_for`, built from the template's parts that do not change between ranks."""
        if self.parts is None:
            self.parts = [_split_block(k, memo) for k in self.keys]
        shift = rank - self.rep
        rename = {self.groups[k]: groups[k] for k in self.groups}
        peers: dict[tuple[Any, Any], bytes] = {}  # (src, dst) -> their two records (a rank has few pairs)
        out = []
        for key, (pre, mid, post) in zip(self.keys, self.parts):
            src, dst, pg = key[_SRC], key[_DST], key[_PG]
            if src is None and dst is None:
                out.append(pre + mid + post if pg is None else
                           b"".join((pre, mid, attr_record("pg_name", rename.get(pg, pg), memo), post)))
                continue
            pair = peers.get((src, dst))
            if pair is None:
                pair = peers[src, dst] = (b"" if src is None else attr_record("comm_src", src + shift, memo)) + \
                    (b"" if dst is None else attr_record("comm_dst", dst + shift, memo))
            out.append(b"".join((pre, pair, mid, b"" if pg is None else
                                 attr_record("pg_name", rename.get(pg, pg), memo), post)))
        return out

    def head_pieces(self) -> Heads:
        """The encoded node heads (fields 1-9), the same for every rank of the stage."""
        if self.heads is None:
            self.heads = encode_heads(self.cols)
        return self.heads

    def join(self, blocks: list[bytes]) -> bytes:
        """The records of the rank whose attribute blocks are ``blocks`` (no GlobalMetadata)."""
        return join_records(self.head_pieces(), blocks, self.cols.attr)

    def encode(self, rank: int, groups: dict[str, str], memo: dict[Any, bytes]) -> bytes:
        """Rank ``rank``'s records (no GlobalMetadata), as :func:`netsim.chakra.write_et` would write them."""
        return self.join(self.blocks(rank, groups, memo))

    def check(self, plan, rank: int) -> None:
        """Raise RuntimeError unless stamping ``rank`` from this template gives the generator's own nodes."""
        own = RankTemplate.from_nodes(rank, plan.member[rank], plan.nodes(rank))
        c, o = self.cols, own.cols
        same = (self.keys_for(rank, plan.member[rank]) == own.keys and c.names == o.names
                and all(np.array_equal(a, b) for a, b in ((c.id, o.id), (c.name, o.name), (c.type, o.type),
                                                         (c.duration, o.duration), (c.attr, o.attr),
                                                         *zip(c.ctrl, o.ctrl), *zip(c.data, o.data))))
        if not same:
            raise RuntimeError(f"rank {rank} is not rank {self.rep}'s trace with shifted peers and renamed "
                               "groups; the generator changed: update netsim/workload/generate/template.py")

    def table(self, rank: int, groups: dict[str, str], source: str) -> NodeTable:
        """Rank ``rank``'s :class:`NodeTable`, equal to reading the file :meth:`encode` writes."""
        keys = self.keys_for(rank, groups)
        index: dict[tuple[Any, ...], int] = {}
        remap = np.array([index.setdefault(k, len(index)) for k in keys], np.int64)
        distinct = list(index)
        columns: dict[str, Any] = dict(zip(_KEY_COLUMNS, zip(*distinct)))
        attr_columns = {c: np.array([MISSING if v is None else v for v in columns[c]], np.int64) for c in INT_COLUMNS}
        pg_index: dict[str, int] = {}
        dim_index: dict[tuple[bool, ...], int] = {}
        attr_columns["pg"] = np.array([-1 if v is None else pg_index.setdefault(v, len(pg_index))
                                       for v in columns["pg_name"]], np.int32)
        attr_columns["is_cpu_op"] = np.array([-1 if v is None else int(v) for v in columns["is_cpu_op"]], np.int8)
        attr_columns["involved_dim"] = np.array([-1 if v is None else dim_index.setdefault(v, len(dim_index))
                                                 for v in columns["involved_dim"]], np.int32)
        attr_columns["op_kind"] = op_kind_codes(columns["op_kind"])
        shared = self.shared_columns()
        code = shared["attr_code"] if np.array_equal(remap, np.arange(remap.size)) else remap[self.cols.attr]
        return NodeTable(
            source=source, metadata=EtMetadata(VERSION, dict(self.metadata_attrs)), id=shared["id"], name=list(shared["name"]),
            type=shared["type"], duration_micros=shared["duration"], attr_code=code, attr_columns=attr_columns,
            pg_names=list(pg_index), involved_dims=list(dim_index), data_ptr=shared["data_ptr"],
            data_deps=shared["data_deps"], ctrl_ptr=shared["ctrl_ptr"], ctrl_deps=shared["ctrl_deps"])

    def shared_columns(self) -> dict[str, Any]:
        """The columns every rank of the stage has alike, built once; the arrays are read-only, since
        the tables of all those ranks share them (netsim run --llm --symmetry none on 16,384 ranks
        then holds one copy per stage instead of one per rank)."""
        if self.shared is None:
            c = self.cols
            arrays = {"id": c.id, "type": c.type.astype(np.int32), "duration": c.duration, "attr_code": c.attr,
                      "data_ptr": c.data[1], "data_deps": c.data[0], "ctrl_ptr": c.ctrl[1], "ctrl_deps": c.ctrl[0]}
            self.shared = {k: _read_only(v) for k, v in arrays.items()}
            self.shared["name"] = tuple(c.names[i] for i in c.name.tolist())
        return self.shared


def _read_only(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    out.flags.writeable = False
    return out


def _split_block(key: tuple[Any, ...], memo: dict[Any, bytes]) -> tuple[bytes, bytes, bytes]:
    """The encoded attributes of ``key`` around comm_src/comm_dst and pg_name: (before, between, after).

    :func:`~netsim.chakra.write.attr_block` joins one record per present member in
    WRITE_MEMBERS order, so the block is ``before + src + dst + between + pg + after``.
    """
    def run(lo: int, hi: int) -> bytes:
        return b"".join(attr_record(name, v, memo) for (name, _), v in zip(WRITE_MEMBERS[lo:hi], key[lo:hi])
                        if v is not None)
    return run(0, _SRC), run(_DST + 1, _PG), run(_PG + 1, len(key))


def stamp_reference(plan, rank: int) -> bytes:
    """Rank ``rank``'s records through the protobuf reference encoder (for tests and checks)."""
    memo: dict[Any, bytes] = {}
    return b"".join(encode_node(x, memo) for x in plan.nodes(rank))

"""The MLCommons Chakra execution-trace format: read, write, scan, check, inspect, groups.

This package is the format alone; running a trace is :mod:`netsim.workload`'s job.

* :mod:`netsim.chakra.files` reads and writes ``.et`` files (re-exported here);
* :mod:`netsim.chakra.schema` declares the protobuf messages, :mod:`netsim.chakra.model`
  the decoded data model (:class:`NodeTable`, :class:`EtNode`);
* :mod:`netsim.chakra.scan` / :mod:`netsim.chakra.decode` are the vectorised decoder,
  :mod:`netsim.chakra.write` the encoder;
* :mod:`netsim.chakra.check` says whether a decoded trace is runnable,
  :mod:`netsim.chakra.inspect` summarises workloads,
  :mod:`netsim.chakra.groups` says which ranks a ``pg_name`` means.
"""

from netsim.chakra.files import (
    MISSING,
    CommType,
    EtMetadata,
    EtNode,
    EtTrace,
    NodeTable,
    NodeType,
    iter_nodes,
    iter_records,
    read_et,
    read_et_table,
    read_metadata,
    write_et,
    write_workload,
)

__all__ = [
    "MISSING", "CommType", "EtMetadata", "EtNode", "EtTrace", "NodeTable", "NodeType",
    "iter_nodes", "iter_records", "read_et", "read_et_table", "read_metadata", "write_et", "write_workload",
]

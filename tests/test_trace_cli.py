"""``netsim trace inspect`` on the real traces."""

import json

import pandas as pd

from netsim.cli import main


def test_inspect_pytorch_rank(traces, capsys):
    assert main(["trace", "inspect", str(traces / "mlcommons__chakra/tests/data/chakra.0.et"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["nodes"] == 3664 and s["node_types"] == {"COMM_COLL_NODE": 21, "COMP_NODE": 3643}
    assert s["host_comm_nodes"] == 14 and s["unknown_dep_ids"] == 210
    assert sum(c["count"] for c in s["collectives"] if c["comm_type"] == "ALL_REDUCE") == 5


def test_inspect_prefix_and_parquet(traces, tmp_path, capsys):
    prefix = traces / "astra-sim__astra-sim/examples/workload/microbenchmarks/all_gather/16npus_1MB/all_gather"
    out = tmp_path / "nodes.parquet"
    assert main(["trace", "inspect", str(prefix), "--parquet", str(out)]) == 0
    text = capsys.readouterr().out
    assert "16 (0..15)" in text and "ALL_GATHER" in text
    frame = pd.read_parquet(out)
    assert len(frame) == 16 and sorted(frame["rank"]) == list(range(16))
    assert main(["trace", "inspect", str(prefix), "--parquet", str(out)]) == 2  # no overwrite


def test_inspect_rejects_legacy(traces, capsys):
    legacy = traces / "mlcommons__chakra-old@e7300c4/test/standard_output/et/one_comp_node"
    assert main(["trace", "inspect", str(legacy)]) == 2
    err = capsys.readouterr().err
    assert "legacy Chakra" in err and err.count("\n") == 1

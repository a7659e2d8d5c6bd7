"""``netsim workload llm`` then ``netsim run`` on what it wrote."""

import json

from netsim.cli import main


def test_generate_then_run(tmp_path, capsys):
    out = tmp_path / "wl"
    args = ["workload", "llm", "--model", "mixtral-8x7b", "--tp", "2", "--pp", "2", "--dp", "2", "--ep", "2",
            "--seq", "256", "--microbatches", "2", "--out", str(out)]
    assert main(args) == 0
    assert len(list(out.glob("llm.*.et"))) == 8
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--workload", str(out / "llm"),
                 "--comm-groups", str(out / "comm_groups.json"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["ranks"] == 8 and s["iteration_us"] > 0 and s["exposed_comm_us_mean"] >= 0


def test_bad_parallelism_is_one_line(tmp_path, capsys):
    assert main(["workload", "llm", "--model", "llama3-70b", "--tp", "2", "--pp", "100", "--dp", "1",
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert "pp=100" in err and "\n" not in err

"""--compute-efficiency: roofline compute at F x the GPU preset's peak FLOP/s."""

import pytest

from netsim.errors import InputError
from netsim.cli import main
from netsim.workload.cli import check_compute_efficiency
from netsim.workload.generate.model import ModelSpec
from netsim.workload.llmrun import simulate_llm

DGX = "topologies/dgx-h100.yaml"
#: Big GEMMs (hidden 2048, 4096 tokens): every compute node is compute-bound on an H100.
TINY = ModelSpec("tiny", layers=2, hidden=2048, ffn=8192, heads=16, vocab=1000)
GEN = dict(tp=8, pp=1, dp=1, microbatches=1, seq=4096)


def test_default_is_the_peak_and_leaves_the_config_alone():
    base = simulate_llm(DGX, TINY, model="analytical", **GEN)
    same = simulate_llm(DGX, TINY, model="analytical", compute_efficiency=1.0, **GEN)
    assert "compute_efficiency" not in base.config and same.config == base.config
    assert same.compute.mean() == base.compute.mean()


def test_compute_bound_work_slows_by_one_over_f():
    base = simulate_llm(DGX, TINY, model="analytical", **GEN)
    half = simulate_llm(DGX, TINY, model="analytical", compute_efficiency=0.5, **GEN)
    assert half.compute.mean() == pytest.approx(2 * base.compute.mean(), rel=1e-9)
    assert half.config["compute_efficiency"] == 0.5  # recorded in the run's config (runs table)
    assert any("0.5 x peak" in n for n in half.notes)
    assert half.finish.max() > base.finish.max()


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "x"])
def test_bad_values_are_input_errors(bad):
    with pytest.raises(InputError, match="--compute-efficiency"):
        check_compute_efficiency(bad)


def test_cli_flag(capsys):
    assert main(["run", "--topology", DGX, "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1",
                 "--microbatches", "1", "--seq", "512", "--model", "analytical", "--compute-efficiency", "0.4",
                 "--json", "-q"]) == 0
    assert "0.4 x peak" in capsys.readouterr().out

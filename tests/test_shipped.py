"""Notebooks and examples find the repository's shipped files after a non-editable install."""

from pathlib import Path

import pytest

import netsim
from netsim import shipped

REPO = Path(__file__).resolve().parents[1]


def test_found_from_the_checkout_when_the_package_is_installed_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setattr(shipped, "__file__", str(tmp_path / "site-packages" / "netsim" / "shipped.py"))
    monkeypatch.chdir(REPO / "notebooks")
    assert netsim.find_shipped("topologies/studies/fat_tree_design.yaml") == \
        REPO / "topologies" / "studies" / "fat_tree_design.yaml"
    monkeypatch.chdir(tmp_path)  # outside any checkout, package not in one either
    with pytest.raises(FileNotFoundError, match="fat_tree_design.yaml: not found from .*run from a netsim checkout"):
        netsim.find_shipped("topologies/studies/fat_tree_design.yaml")


def test_nearest_folder_wins(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for d in (tmp_path, tmp_path / "a"):
        (d / "x.yaml").write_text(str(d))
    assert shipped.find_shipped("x.yaml", start=tmp_path / "a" / "b") == tmp_path / "a" / "x.yaml"

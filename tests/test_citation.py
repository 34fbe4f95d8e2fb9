"""CITATION.cff is valid YAML naming this version of the package."""

import pathlib

import yaml

import so101_mjx

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_citation_names_this_version():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["title"].startswith("so101_mjx")
    assert str(citation["version"]) == so101_mjx.__version__

"""The chart ships the same CRDs as crds/ and one version everywhere."""

import tomllib
from pathlib import Path

import yaml

import agent_operator
import agent_runtime

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "agent-engine"


def test_chart_crds_match_source_of_truth() -> None:
    source = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    shipped = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert source, "crds/ holds no CRD"
    drifted = sorted(
        set(source) ^ set(shipped) | {n for n in source.keys() & shipped.keys() if source[n] != shipped[n]}
    )
    assert not drifted, f"charts/agent-engine/crds drifted from crds/: {drifted}; run `make sync-crds`"


def test_one_version_everywhere() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == project
    assert agent_runtime.__version__ == agent_operator.__version__ == project

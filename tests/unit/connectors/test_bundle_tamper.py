"""A mounted bundle is tamper-evident: a file changed after the build, or another bundle than the one the
operator rendered (its digest in the environment), stops the runtime from starting."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.connectors import ConnectorError, build_bundle, resolve_runtime_bundle, write_bundle
from agent_runtime.contract import BUNDLE_DIGEST_ENV, BUNDLE_PATH_ENV
from tests.unit.connectors.test_bundle import _connector


def test_a_file_changed_after_the_build_is_refused(tmp_path: Path) -> None:
    index = write_bundle(build_bundle([_connector()]), tmp_path)
    compiled = tmp_path / "jiradc.yaml"
    compiled.write_text(compiled.read_text().replace("https://j.invalid", "https://attacker.invalid"))
    with pytest.raises(ConnectorError, match="does not match the sha256 the index lists"):
        resolve_runtime_bundle(env={BUNDLE_PATH_ENV: str(index)})


def test_another_bundle_than_the_rendered_digest_is_refused(tmp_path: Path) -> None:
    rendered = build_bundle([_connector()])
    other = write_bundle(build_bundle([_connector("other")]), tmp_path)
    env = {BUNDLE_PATH_ENV: str(other), BUNDLE_DIGEST_ENV: rendered.digest}
    with pytest.raises(ConnectorError, match=f"not the {rendered.digest[:12]} that {BUNDLE_DIGEST_ENV}"):
        resolve_runtime_bundle(env=env)
    env[BUNDLE_DIGEST_ENV] = build_bundle([_connector("other")]).digest
    assert resolve_runtime_bundle(env=env).tool_count == rendered.tool_count

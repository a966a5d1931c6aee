"""The OE's Registry and its directory source: lookups by token digest, conflicts, hot reload, bad files."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.oe.registration import REGISTRATION_KEY, REGISTRATION_LABEL, AgentRegistration
from agent_runtime.oe.registry import (
    DirectorySource,
    KubernetesSecretSource,
    RegistrationError,
    RegistrationSourceError,
    Registry,
    _ApiError,
    _Gone,
    from_env,
    parse_registration,
)

TOKEN_A = "tok-a-" + "a" * 40
TOKEN_B = "tok-b-" + "b" * 40


def _doc(agent: str = "team-a/bot", token: str = TOKEN_A, **extra: Any) -> dict[str, Any]:
    return {
        "agent": agent,
        "token": token,
        "aerUrl": "http://127.0.0.1:8001/",
        "toolUrl": "http://127.0.0.1:8002",
        **extra,
    }


def _reg(agent: str = "team-a/bot", token: str = TOKEN_A) -> AgentRegistration:
    return AgentRegistration.model_validate(_doc(agent, token))


def _tokens(registry: Registry, agent: str = "team-a/bot") -> tuple[str, ...]:
    found = registry.get(agent)
    return found.tokens() if found is not None else ()


def _agent_of(registry: Registry, token: str) -> str | None:
    found = registry.by_token(token)
    return found.agent if found is not None else None


# -- Registry


def test_lookup_by_name_and_by_token() -> None:
    registry = Registry([_reg("team-a/bot", TOKEN_A), _reg("team-b/bot", TOKEN_B)])
    assert len(registry) == 2 and registry.agents == ("team-a/bot", "team-b/bot")
    found = registry.by_token(TOKEN_B)
    assert found is not None and found.agent == "team-b/bot"
    assert registry.get("team-a/bot") is registry.by_token(TOKEN_A)
    assert registry.by_token("not-a-token") is None and registry.get("team-c/bot") is None


def test_upsert_with_a_new_token_retires_the_old_one_and_remove_forgets_both() -> None:
    registry = Registry([_reg(token=TOKEN_A)], grace_s=0)  # no grace: see tests/unit/oe/test_token_grace.py
    registry.upsert(_reg(token=TOKEN_B))
    assert registry.by_token(TOKEN_A) is None and registry.by_token(TOKEN_B) is not None
    removed = registry.remove("team-a/bot")
    assert removed is not None and registry.by_token(TOKEN_B) is None and registry.get("team-a/bot") is None
    assert registry.remove("team-a/bot") is None


def test_a_token_another_agent_holds_is_refused_without_quoting_it() -> None:
    registry = Registry([_reg("team-a/bot", TOKEN_A)])
    with pytest.raises(RegistrationError) as caught:
        registry.upsert(_reg("team-b/bot", TOKEN_A))
    assert caught.value.field == "token" and "team-a/bot" in str(caught.value)
    assert TOKEN_A not in str(caught.value)
    assert _agent_of(registry, TOKEN_A) == "team-a/bot"


def test_replace_all_swaps_everything_and_reports_conflicts_in_source_order() -> None:
    registry = Registry([_reg("old/bot", TOKEN_B)])
    errors = registry.replace_all(
        {
            "file b.json": _reg("team-a/bot", "other-token-" + "c" * 30),
            "file a.json": _reg("team-a/bot", TOKEN_A),
            "file c.json": _reg("team-c/bot", TOKEN_A),
        }
    )
    assert registry.agents == ("team-a/bot",) and _agent_of(registry, TOKEN_A) == "team-a/bot"
    assert [(e.source, e.field) for e in errors] == [("file b.json", "agent"), ("file c.json", "token")]
    assert "already registered by file a.json" in str(errors[0])
    assert all(TOKEN_A not in str(e) for e in errors)
    assert registry.get("old/bot") is None


# -- parsing


def test_camel_case_and_snake_case_documents_parse_alike() -> None:
    camel = parse_registration(json.dumps(_doc()).encode(), source="s", yaml_allowed=False)
    snake = _doc()
    snake["aer_url"], snake["tool_url"] = snake.pop("aerUrl"), snake.pop("toolUrl")
    assert parse_registration(json.dumps(snake).encode(), source="s") == camel
    assert camel.aer_url == "http://127.0.0.1:8001"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (json.dumps(_doc(aerUrl="ftp://127.0.0.1")).encode(), "aerUrl"),
        (json.dumps(_doc(token=12345)).encode(), "token"),
        (json.dumps(_doc(extra="x")).encode(), "extra"),
        (json.dumps([_doc()]).encode(), "(document)"),
        (f"agent: team-a/bot\ntoken: {TOKEN_A}\n  bad: [".encode(), "(document)"),
        (f'{{"token": "{TOKEN_A}", '.encode(), "(document)"),
        (b"\xff\xfe", "(document)"),
    ],
)
def test_bad_documents_name_the_source_and_field_never_the_token(raw: bytes, field: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        parse_registration(raw, source="file x.yaml")
    assert caught.value.field == field and str(caught.value).startswith("registration file x.yaml: ")
    assert TOKEN_A not in str(caught.value) and "12345" not in str(caught.value)


# -- DirectorySource


def _write(path: Path, document: dict[str, Any] | str) -> None:
    text = document if isinstance(document, str) else json.dumps(document)
    path.write_text(text)
    # Bump the mtime past the filesystem's granularity: a rewrite within one tick must still be seen.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_directory_source_loads_json_and_yaml_and_ignores_other_files(tmp_path: Path) -> None:
    _write(tmp_path / "a.json", _doc("team-a/bot", TOKEN_A))
    _write(
        tmp_path / "b.yaml",
        f"agent: team-b/bot\ntoken: {TOKEN_B}\naer_url: http://127.0.0.1:1\ntool_url: http://127.0.0.1:2\n",
    )
    _write(tmp_path / "c.yml", _doc("team-c/bot", "tok-c-" + "c" * 40))
    _write(tmp_path / "notes.txt", "not a registration")
    _write(tmp_path / ".hidden.json", _doc("team-d/bot", "tok-d-" + "d" * 40))
    source = DirectorySource(tmp_path)
    assert not source.synced
    asyncio.run(source.refresh())
    assert source.synced
    assert source.registry.agents == ("team-a/bot", "team-b/bot", "team-c/bot")
    assert _agent_of(source.registry, TOKEN_B) == "team-b/bot"


def test_directory_source_sees_new_changed_and_removed_files(tmp_path: Path) -> None:
    source = DirectorySource(tmp_path)

    async def scenario() -> None:
        await source.refresh()
        assert len(source.registry) == 0
        _write(tmp_path / "a.json", _doc(token=TOKEN_A))
        await source.refresh()
        assert source.registry.by_token(TOKEN_A) is not None
        _write(tmp_path / "a.json", _doc(token=TOKEN_B))
        await source.refresh()
        assert _agent_of(source.registry, TOKEN_B) == "team-a/bot"
        assert _tokens(source.registry) == (TOKEN_B, TOKEN_A)  # the previous one, in its grace period
        (tmp_path / "a.json").unlink()
        await source.refresh()
        assert len(source.registry) == 0

    asyncio.run(scenario())


def test_a_bad_file_is_logged_without_the_token_and_the_others_still_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path / "good.json", _doc("team-a/bot", TOKEN_A))
    _write(tmp_path / "bad.json", _doc("team-b/bot", TOKEN_B, aerUrl="not a url"))
    source = DirectorySource(tmp_path)
    with caplog.at_level(logging.WARNING, logger="agent_runtime.oe.registry"):
        asyncio.run(source.refresh())
        asyncio.run(source.refresh())  # an unchanged bad file is not reported again
    assert source.registry.agents == ("team-a/bot",)
    (record,) = caplog.records
    assert f"file {tmp_path / 'bad.json'}" in record.getMessage() and "aerUrl" in record.getMessage()
    assert TOKEN_B not in caplog.text


def test_a_broken_edit_keeps_the_previous_good_version_in_service(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "a.yaml"
    _write(path, _doc(token=TOKEN_A))
    source = DirectorySource(tmp_path)

    async def scenario() -> None:
        await source.refresh()
        _write(path, f"agent: team-a/bot\ntoken: {TOKEN_B}\naerUrl: [")
        with caplog.at_level(logging.WARNING, logger="agent_runtime.oe.registry"):
            await source.refresh()
        assert source.registry.by_token(TOKEN_A) is not None
        assert "previous version stays in service" in caplog.text and TOKEN_B not in caplog.text
        _write(path, _doc(token=TOKEN_B))
        await source.refresh()
        assert _agent_of(source.registry, TOKEN_B) == "team-a/bot"
        assert _tokens(source.registry) == (TOKEN_B, TOKEN_A)  # the previous one, in its grace period

    asyncio.run(scenario())


def test_two_files_for_one_agent_serve_the_first_and_report_the_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path / "1.json", _doc(token=TOKEN_A))
    _write(tmp_path / "2.json", _doc(token=TOKEN_B))
    source = DirectorySource(tmp_path)
    with caplog.at_level(logging.WARNING, logger="agent_runtime.oe.registry"):
        asyncio.run(source.refresh())
    assert source.registry.by_token(TOKEN_A) is not None and source.registry.by_token(TOKEN_B) is None
    assert "2.json" in caplog.text and "already registered" in caplog.text
    assert TOKEN_A not in caplog.text and TOKEN_B not in caplog.text


def test_a_missing_directory_serves_nothing_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = DirectorySource(tmp_path / "absent")
    with caplog.at_level(logging.WARNING, logger="agent_runtime.oe.registry"):
        asyncio.run(source.refresh())
        asyncio.run(source.refresh())
    assert len(source.registry) == 0 and len(caplog.records) == 1


# -- choosing a source


def test_from_env_picks_the_directory_first(tmp_path: Path) -> None:
    env = {"OE_REGISTRATIONS_DIR": str(tmp_path), "KUBERNETES_SERVICE_HOST": "127.0.0.1"}
    registry = Registry()
    source = from_env(env, registry=registry)
    assert isinstance(source, DirectorySource) and source.registry is registry


def test_from_env_in_a_cluster_reads_its_own_namespace() -> None:
    env = {
        "KUBERNETES_SERVICE_HOST": "::1",
        "KUBERNETES_SERVICE_PORT": "6443",
        "OE_NAMESPACE": "agent-engine",
    }
    source = from_env(env)
    assert isinstance(source, KubernetesSecretSource)
    assert source.api_url == "https://[::1]:6443" and source.namespace == "agent-engine"


def test_in_cluster_falls_back_to_the_service_account_namespace(tmp_path: Path) -> None:
    (tmp_path / "namespace").write_text("platform\n")
    source = KubernetesSecretSource.in_cluster({"KUBERNETES_SERVICE_HOST": "127.0.0.1"}, sa_dir=tmp_path)
    assert source.namespace == "platform" and source.api_url == "https://127.0.0.1:443"
    assert source.token_path == tmp_path / "token" and source.ca_path == tmp_path / "ca.crt"
    with pytest.raises(RegistrationSourceError, match="OE_NAMESPACE"):
        KubernetesSecretSource.in_cluster({"KUBERNETES_SERVICE_HOST": "127.0.0.1"}, sa_dir=tmp_path / "no")


def test_from_env_without_a_directory_or_a_cluster_is_an_error() -> None:
    with pytest.raises(RegistrationSourceError, match="OE_REGISTRATIONS_DIR"):
        from_env({})


# -- the Secret watch's wire format (the cluster tier runs the source against a real API server)


def _secret_source() -> KubernetesSecretSource:
    return KubernetesSecretSource(
        api_url="https://127.0.0.1:6443", namespace="ns", token_path="t", ca_path=None
    )


def test_a_410_error_event_asks_for_a_new_list_and_a_bookmark_moves_the_resource_version() -> None:
    source = _secret_source()
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Secret", "metadata": {"resourceVersion": "42"}}}
    assert source._event(json.dumps(bookmark)) == "42"
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    with pytest.raises(_Gone):
        source._event(json.dumps(gone))
    with pytest.raises(_ApiError, match="not a watch event"):
        source._event(f'{{"type": "ADDED", "object": {{"token": "{TOKEN_A}"')


def test_secret_events_add_replace_and_remove_registrations() -> None:
    source = _secret_source()

    def event(kind: str, token: str, version: str) -> str:
        data = base64.b64encode(json.dumps(_doc(token=token)).encode()).decode()
        metadata = {"name": "reg", "resourceVersion": version, "labels": {REGISTRATION_LABEL: "true"}}
        return json.dumps({"type": kind, "object": {"metadata": metadata, "data": {REGISTRATION_KEY: data}}})

    assert source._event(event("ADDED", TOKEN_A, "5")) == "5"
    assert _agent_of(source.registry, TOKEN_A) == "team-a/bot"
    source._event(event("MODIFIED", TOKEN_B, "6"))
    assert _agent_of(source.registry, TOKEN_B) == "team-a/bot"
    assert _tokens(source.registry) == (TOKEN_B, TOKEN_A)  # the previous one, in its grace period
    source._event(event("DELETED", TOKEN_B, "7"))
    assert len(source.registry) == 0

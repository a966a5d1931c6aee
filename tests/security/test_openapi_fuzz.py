"""A bounded fuzz run driven by the OE's own OpenAPI document (GET /openapi.json of a real OE): every client
operation it lists is called with path parameters, query values and bodies drawn by hypothesis (derandomized),
the real ids mixed in, and none answers a 500 (issue 29). The model-based run is test_input_edges.py's."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Process
from tests.integration.loop.harness import AGENT, LLM_KEY, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

pytestmark = pytest.mark.security
PROJECT, NAME = AGENT.split("/")
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
RAW = st.sampled_from([b"", b"null", b"{", b"[]", b'{"a": 1e400}', b"[" * 300 + b"]" * 300, b"\xff\xfe"])


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]
) -> Iterator[Platform]:
    with running_llm_peer(api_key=LLM_KEY) as peer, running_echo_provider() as provider:
        yield Platform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=peer.base_url,
            provider_url=provider.url,
        ).start()


def _bodies(document: dict[str, Any], op: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """Objects with the body schema's property names and any JSON values, any JSON at all, and raw bytes."""
    content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
    names: list[str] = []
    if content is not None:
        ref = content["schema"]["$ref"].rsplit("/", 1)[1]
        names = sorted(document["components"]["schemas"][ref].get("properties", {}))
    objects = st.dictionaries(st.sampled_from(names), JSON, max_size=len(names)) if names else st.just({})
    return objects.map(lambda d: json.dumps(d).encode()) | JSON.map(lambda v: json.dumps(v).encode()) | RAW


TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=20) | st.integers().map(str)


def _fuzz_operation(
    client: httpx.Client, document: dict[str, Any], *, path: str, method: str, real: dict[str, str]
) -> None:
    op = document["paths"][path][method]
    params = {p["name"]: p for p in op.get("parameters", [])}
    path_names = re.findall(r"{([^}]+)}", path)
    query_names = sorted(n for n, p in params.items() if p["in"] == "query") or ["x"]

    @FUZZ
    @given(
        values=st.fixed_dictionaries(
            {name: st.just(real.get(name, "1")) | TEXTS.filter(bool) for name in path_names}
        ),
        query=st.dictionaries(st.sampled_from(query_names), TEXTS, max_size=3),
        body=_bodies(document, op),
    )
    def call(values: dict[str, str], query: dict[str, str], body: bytes) -> None:
        url = path
        for name, value in values.items():
            url = url.replace("{" + name + "}", quote(value, safe=""))
        headers = {"content-type": "application/json"}
        answer = client.request(method.upper(), url, params=query, content=body, headers=headers)
        assert answer.status_code < 500, (method, url, query, body[:200], answer.text[:300])

    call()


def test_every_operation_of_the_document_answers_no_500(platform: Platform) -> None:
    execution_id = platform.invoke({"mode": "none"})
    real = {"execution_id": execution_id, "project_id": PROJECT, "agent": NAME, "connector": "echo"}
    called = []
    with platform.client() as client:
        document = client.get("/openapi.json").json()
        for path, methods in document["paths"].items():
            for method, op in methods.items():
                if op["operationId"] == "followEvents":
                    continue  # a stream that stays open: test_input_edges checks its `after`
                _fuzz_operation(client, document, path=path, method=method, real=real)
                called.append(op["operationId"])
    assert {"invoke", "testConnector", "resumeInProject", "interruptCall"} <= set(called)

"""The loopback echo provider, in-process and as a process."""

from __future__ import annotations

import sys

import httpx

from tests.conftest import free_port, wait_for_port
from tests.providers.echo_provider import running_echo_provider


def test_echo_shows_path_query_headers_and_form_body() -> None:
    with running_echo_provider() as provider:
        response = httpx.post(
            f"{provider.url}/echo/v1/customers",
            params={"expand[0]": "data.x"},
            data={"metadata[a]": "1"},
            headers={"X-Test": "yes"},
        )
    doc = response.json()
    assert doc["method"] == "POST"
    assert doc["path"] == "/echo/v1/customers"
    assert doc["query_pairs"] == [["expand[0]", "data.x"]]
    assert doc["headers"]["x-test"] == "yes"
    assert doc["form"] == [["metadata[a]", "1"]]


def test_flaky_fails_then_succeeds_and_counts_hits() -> None:
    with running_echo_provider() as provider, httpx.Client(base_url=provider.url) as client:
        first = client.get("/flaky/k1", params={"fail": 1, "status": 429, "retry_after": 2})
        second = client.get("/flaky/k1", params={"fail": 1})
        hits = client.get("/hits/k1").json()["hits"]
    assert (first.status_code, first.headers["retry-after"]) == (429, "2")
    assert second.status_code == 200
    assert hits == 2


def test_leak_quotes_the_credential_and_redirect_points_elsewhere() -> None:
    with running_echo_provider() as provider, httpx.Client(base_url=provider.url) as client:
        leak = client.get("/leak/401", headers={"Authorization": "Bearer sk_live_secret"})
        redirect = client.get("/redirect", params={"to": "http://localhost:1/x"})
    assert leak.status_code == 401
    assert "sk_live_secret" in leak.text
    assert redirect.headers["location"] == "http://localhost:1/x"


def test_endless_body_keeps_streaming() -> None:
    with running_echo_provider() as provider, httpx.stream("GET", f"{provider.url}/endless") as response:
        received = 0
        for chunk in response.iter_bytes():
            received += len(chunk)
            if received > 1_000_000:
                break
    assert received > 1_000_000


def test_runs_as_a_module_process(spawn) -> None:
    port = free_port()
    proc = spawn([sys.executable, "-m", "tests.providers.echo_provider", "--port", str(port)], name="echo")
    wait_for_port("127.0.0.1", port, proc=proc.popen)
    assert httpx.get(f"http://127.0.0.1:{port}/echo/x?a=1").json()["query"] == "a=1"

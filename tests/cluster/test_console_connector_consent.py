"""A person's consent to an Agent's MCP connector through the console, in a cluster (issue 37), on a real API
server, the operator and the OE as the chart's identities, the console driven over its own HTTP routes
(sign-in, the form with its CSRF token, the authorization server's redirect, the callback with the
browser's cookies, sent by hand as a browser sends them), and once more in Chromium.

The operator pre-creates `mcp-oauth-crm2` and the Role `bot-mcp-consent` (the OE's ServiceAccount: get on
the Agent and the Connector, update on that Secret, by name). Alice (update on Agent bot) completes the
consent: the OE reads the MCP URL and the pinned issuer from the Connector (no URL in the form), asks only
that authorization server and writes the token file into the Secret; the operator discovers the tools with
it and the Agent becomes Ready; the Tool Pod the operator rendered calls with it, and a second consent
replaces what the Tool Pod keeps once the mount changes. The attacks: another team's updater, a connector
the Agent does not use, a Connector re-pointed at another issuer (no request reaches it), a forged state,
the OE's own token on any other Secret; no token in any status, Event, log or page.
"""

from __future__ import annotations

import base64
import html
import json
import re
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console, browser, console_for, playwright  # noqa: F401 - fixtures
from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import GROUP, VERSION, Api, RunningOperator, manifests, ready, wait_for
from tests.conftest import REPO_ROOT, Process, free_port
from tests.integration.loop.harness import Platform
from tests.providers.mcp_oauth_peer import OAuthPeer, mcp_oauth_server
from tests.rendered_pods import run_rendered_container

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

AUDIENCE = "agent-engine"
OE_NAMESPACE = "agent-engine"  # the operator's default oe_namespace


def _kubectl(cluster: ControlPlane, *args: str, input: str | None = None) -> str:
    return str(cluster.kubectl(*args, input=input).stdout)


def _token(cluster: ControlPlane, namespace: str, name: str, *, audience: str | None) -> str:
    _kubectl(cluster, "create", "serviceaccount", name, "-n", namespace)
    args = ["create", "token", name, "-n", namespace, "--duration", "1h"]
    return _kubectl(cluster, *args, *(["--audience", audience] if audience else [])).strip()


def _connector(namespace: str, name: str, url: str, issuer: str) -> dict[str, Any]:
    auth = {"type": "oauth", "grant": "authorization_code", "authorization_server": issuer}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": {"type": "mcp"}, "config": {"url": url, "auth": auth}},
    }


class _Counting(BaseHTTPRequestHandler):
    """An issuer no one should ask: it counts what reaches it."""

    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, list[str]]]:
    _Counting.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", _Counting.hits
    finally:
        server.shutdown()


def _rbac(api: Api, kind: str, name: str) -> dict[str, Any] | None:
    answer = api.http.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{api.namespace}/{kind}/{name}")
    return dict(answer.json()) if answer.is_success else None


def _secret_file(api: Api, name: str = "mcp-oauth-crm2") -> dict[str, Any] | None:
    data = (api.get("secrets", name) or {}).get("data") or {}
    raw = data.get("crm2.json")
    return json.loads(base64.b64decode(raw)) if raw else None


class Person:
    """A browser's view of the console: its cookies (Secure ones too: loopback counts as secure) by hand."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=30, trust_env=False)
        login = self.http.get("/console/sign-in").cookies.get("ae_console_login") or ""
        answer = self.http.post(
            "/console/sign-in", json={"token": token, "login_csrf": login},
            headers={"origin": base, "cookie": f"ae_console_login={login}"},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        self.cookies = {"ae_console": answer.cookies.get("ae_console") or ""}
        self.pages: list[str] = []

    def _cookie(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items() if v)

    def get(self, url: str) -> httpx.Response:
        answer = self.http.get(url, headers={"cookie": self._cookie()})
        self.pages.append(answer.text)
        return answer

    def consent(self, agent: str, connector: str) -> httpx.Response:
        """The form (no URL field: the Connector's), then its submission; the answer to the submission."""
        form = self.get(f"/console/connectors/consent?agent={agent}&connector={connector}")
        assert form.status_code == 200 and 'id="consent-url"' not in form.text, form.text
        csrf = html.unescape(re.search(r'name="csrf" value="([^"]+)"', form.text).group(1))  # type: ignore[union-attr]
        answer = self.http.post(
            "/console/connectors/consent",
            data={"csrf": csrf, "agent": agent, "connector": connector},
            headers={"cookie": self._cookie(), "origin": self.base},
        )
        self.pages.append(answer.text)
        if state := answer.cookies.get("ae_console_consent"):
            self.cookies["ae_console_consent"] = state
        return answer

    def complete(self, answer: httpx.Response) -> tuple[str, httpx.Response]:
        """Follow the link to the authorization server (it approves at once) and its redirect back."""
        found = re.search(r'id="consent-continue" href="([^"]+)"', answer.text)
        assert found is not None, answer.text
        link = html.unescape(found.group(1))
        redirect = httpx.get(link, follow_redirects=False, trust_env=False, timeout=30)
        assert redirect.status_code == 302, redirect.text
        back = redirect.headers["location"]
        assert back.startswith(self.base + "/console/connectors/callback"), back
        return link, self.get(back[len(self.base) :])


@dataclass
class World:
    cluster: ControlPlane
    api: Api
    ns: str
    other_ns: str
    oe_account: str
    peer: OAuthPeer
    operator: RunningOperator
    oe: Platform
    people: dict[str, str]
    oe_token: str
    sa_dir: Path


@pytest.fixture
def world(
    cluster: ControlPlane,
    api: Api,
    start_operator: Callable[..., RunningOperator],
    spawn: Callable[..., Process],
    tmp_path: Path,
) -> Iterator[World]:
    """Agent bot (connector crm2, authorization_code, pinned to the loopback issuer) as the operator
    renders it, the OE as its own ServiceAccount, alice (update on bot) and mallory (another namespace)."""
    ns = api.namespace
    other_ns = f"team-b-{uuid.uuid4().hex[:6]}"
    oe_account = f"consent-oe-{uuid.uuid4().hex[:6]}"
    if OE_NAMESPACE not in _kubectl(cluster, "get", "namespaces", "-o", "name"):
        _kubectl(cluster, "create", "namespace", OE_NAMESPACE)
    _kubectl(cluster, "create", "namespace", other_ns)
    try:
        with mcp_oauth_server() as peer:
            yield _setup(cluster, api, ns, other_ns, oe_account, peer, start_operator, spawn, tmp_path)
    finally:
        _kubectl(cluster, "delete", "namespace", other_ns, "--wait=false")
        _kubectl(cluster, "delete", "clusterrolebinding", oe_account, "--ignore-not-found")


def _setup(
    cluster: ControlPlane,
    api: Api,
    ns: str,
    other_ns: str,
    oe_account: str,
    peer: OAuthPeer,
    start_operator: Callable[..., RunningOperator],
    spawn: Callable[..., Process],
    tmp_path: Path,
) -> World:
    operator = start_operator(
        extra_env={"AGENT_OPERATOR_MCP_RETRY_SECONDS": "2", "AGENT_OPERATOR_OE_SERVICE_ACCOUNT": oe_account}
    )
    objs = manifests(ns)
    objs["crm2"] = _connector(ns, "crm2", peer.url, peer.issuer)
    objs["crm3"] = _connector(ns, "crm3", peer.url, peer.issuer)  # no Agent uses it
    objs["agent"]["spec"]["connectors"] = ["crm2"]
    for key in ("llm", "crm2", "crm3", "agent"):
        api.must_apply(objs[key])

    # The operator: the empty Secret and the Role, each object by name; the Agent waits for its tools.
    role = wait_for("the consent Role", lambda: _rbac(api, "roles", "bot-mcp-consent"), timeout=60)
    binding = wait_for("its binding", lambda: _rbac(api, "rolebindings", "bot-mcp-consent"), timeout=30)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": oe_account, "namespace": OE_NAMESPACE}]
    assert [(r["resources"], r["verbs"], r["resourceNames"]) for r in role["rules"]] == [
        (["agents"], ["get"], ["bot"]),
        (["connectors"], ["get"], ["crm2"]),
        (["secrets"], ["update"], ["mcp-oauth-crm2"]),
    ]
    secret = wait_for("the pre-created Secret", lambda: api.get("secrets", "mcp-oauth-crm2"), timeout=30)
    assert not secret.get("data")
    assert api.get("secrets", "mcp-oauth-crm3") is None  # no Agent of it: nothing pre-created

    # The OE as its own ServiceAccount (reviews through system:auth-delegator, nothing else cluster-wide).
    oe_token = _token(cluster, OE_NAMESPACE, oe_account, audience=None)
    _kubectl(cluster, "create", "clusterrolebinding", oe_account, "--clusterrole=system:auth-delegator",
             f"--serviceaccount={OE_NAMESPACE}:{oe_account}")  # fmt: skip
    sa_dir = tmp_path / "oe-sa"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(oe_token)
    (sa_dir / "ca.crt").write_bytes(cluster.ca.cert_pem)
    people = {who: _token(cluster, ns, who, audience=AUDIENCE) for who in ("alice", "mallory")}
    _kubectl(cluster, "create", "role", "bot-updater", "-n", ns, "--verb=get,update",
             "--resource=agents.agentengine.io", "--resource-name=bot")  # fmt: skip
    _kubectl(cluster, "create", "rolebinding", "alice", "-n", ns, "--role=bot-updater",
             f"--serviceaccount={ns}:alice")  # fmt: skip
    # Mallory updates Agents in her own team's namespace only.
    _kubectl(cluster, "create", "role", "updater", "-n", other_ns, "--verb=get,update",
             "--resource=agents.agentengine.io")  # fmt: skip
    _kubectl(cluster, "create", "rolebinding", "mallory", "-n", other_ns, "--role=updater",
             f"--serviceaccount={ns}:mallory")  # fmt: skip

    oe = Platform(tmp=tmp_path / "oe", spawn=spawn, llm_base_url="http://127.0.0.1:9", provider_url="")
    (oe.tmp / "registrations").mkdir(parents=True)
    oe.start_oe(
        extra={
            "OE_CLIENT_AUTH": "kubernetes",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(cluster.apiserver_port),
            "OE_SERVICEACCOUNT_DIR": str(sa_dir),
            "OE_CONNECTOR_CONSENT_ISSUERS": peer.issuer,
        }
    )

    return World(cluster, api, ns, other_ns, oe_account, peer, operator, oe, people, oe_token, sa_dir)


def test_a_console_consent_in_a_cluster_reaches_the_tool_pod_and_nothing_else(
    world: World, spawn: Callable[..., Process], elsewhere: tuple[str, list[str]], tmp_path: Path
) -> None:
    cluster, api, ns, other_ns, peer = world.cluster, world.api, world.ns, world.other_ns, world.peer
    operator, oe, people, oe_token, sa_dir = (
        world.operator,
        world.oe,
        world.people,
        world.oe_token,
        world.sa_dir,
    )
    # Alice consents: no URL to type, a link to the authorization server, the Secret written.
    alice = Person(oe.oe_url, people["alice"])
    link, done = alice.complete(alice.consent(f"{ns}/bot", "crm2"))
    assert link.startswith(peer.issuer) and "code_challenge_method=S256" in link
    assert "resource=" in link and "code_verifier" not in link
    assert done.status_code == 200 and 'id="consent-done"' in done.text, done.text
    first = _secret_file(api)
    assert first is not None and first["grant"] == "authorization_code" and first["tokens"]["refresh_token"]
    assert first["consented_at"] > 0 and first["resource"] == peer.url
    kept_secret = api.get("secrets", "mcp-oauth-crm2") or {}
    assert kept_secret["metadata"]["labels"]["agentengine.io/mcp-oauth-connector"] == "crm2"

    # The operator discovers the tools with the consent's access token; the Agent becomes Ready.
    connector = wait_for("crm2 discovered", lambda: (api.get("connectors", "crm2") or {}).get("status", {})
                         .get("discovery") and api.get("connectors", "crm2"), timeout=90)  # fmt: skip
    tool_name = f"mcp.{connector['metadata']['uid'].replace('-', '')[:8]}.echo"
    assert tool_name in connector["status"]["discovery"]["tools"]
    agent = ready(api)

    # The Tool Pod the operator rendered reads the Secret's token file as its seed and calls the server.
    tool = api.get("deployments", "bot-tool") or {}
    config_maps = {
        n: (api.get("configmaps", n) or {})["data"] for n in agent["status"]["bundle"]["configMaps"]
    }
    secrets = {
        name: {
            k: base64.b64decode(v).decode()
            for k, v in ((api.get("secrets", name) or {}).get("data") or {}).items()
        }
        for name in ("bot-runtime-token", "mcp-oauth-crm2", "llm-keys")
    }
    root = tmp_path / "tool"
    _, port = run_rendered_container(
        deployment=tool, config_maps=config_maps, secrets=secrets, root=root, spawn=spawn,
        pythonpath=str(REPO_ROOT), overrides={"AGENT_ENTRYPOINT": ""},
    )  # fmt: skip
    runtime_token = secrets["bot-runtime-token"]["token"]
    assert _echo(port, runtime_token, tool_name)["status"] == "success"
    kept = root / "tmp" / "mcp-oauth" / "crm2.json"
    peer.revoke()  # the access token dead: the Tool Pod refreshes with the consent's refresh token
    assert _echo(port, runtime_token, tool_name)["status"] == "success"
    assert json.loads(kept.read_text())["consented_at"] == first["consented_at"]

    # A second consent: the Secret changes; once the mount does (the kubelet swaps the file), the Tool Pod
    # takes it over what it keeps.
    _, again = alice.complete(alice.consent(f"{ns}/bot", "crm2"))
    assert 'id="consent-done"' in again.text, again.text
    second = _secret_file(api)
    assert second is not None and second["consented_at"] > first["consented_at"]
    seed = root / "mcp-oauth-seed"
    swap = seed / "..new"
    swap.write_text(json.dumps(second))
    swap.replace(seed / "crm2.json")
    peer.revoke()
    assert _echo(port, runtime_token, tool_name)["status"] == "success"
    assert json.loads(kept.read_text())["consented_at"] == second["consented_at"]

    # -- the attacks --------------------------------------------------------------------------------------
    before = (api.get("secrets", "mcp-oauth-crm2") or {})["metadata"]["resourceVersion"]
    # Another team's updater: refused before any request leaves the OE.
    mallory = Person(oe.oe_url, people["mallory"])
    issued = peer.stats()["issued"].get("authorization_code", 0)
    refused = mallory.consent(f"{ns}/bot", "crm2")
    assert refused.status_code == 403 and "You may not update Agent" in refused.text, refused.text
    # A connector of the namespace that the Agent does not use: the OE may not even read it.
    unused = alice.consent(f"{ns}/bot", "crm3")
    assert unused.status_code == 400 and "does not use connector crm3" in unused.text, unused.text
    # The Connector re-pointed at an issuer the platform did not list: refused, nothing reaches it.
    url, hits = elsewhere
    api.must_apply(_connector(ns, "crm2", peer.url, url))
    wait_for("the new pin read", lambda: (api.get("connectors", "crm2") or {})["spec"]["config"]["auth"]
             ["authorization_server"] == url, timeout=10)  # fmt: skip
    unlisted = alice.consent(f"{ns}/bot", "crm2")
    assert unlisted.status_code == 400, unlisted.text
    assert "oe.connectorConsent.authorizationServers" in unlisted.text, unlisted.text
    assert hits == []
    api.must_apply(_connector(ns, "crm2", peer.url, peer.issuer))
    # A forged state on the callback, in alice's own browser: refused, nothing written.
    forged = alice.get("/console/connectors/callback?state=forged&code=abc")
    assert forged.status_code == 400, forged.text
    assert peer.stats()["issued"].get("authorization_code", 0) == issued
    assert (api.get("secrets", "mcp-oauth-crm2") or {})["metadata"]["resourceVersion"] == before

    # The OE's own token (stolen, say) opens no other Secret: not the Agent's runtime token, not another
    # connector's, not even a read of the token Secret it writes.
    tls = ssl.create_default_context(cafile=str(sa_dir / "ca.crt"))
    as_oe = httpx.Client(base_url=cluster.server, verify=tls,
                         headers={"authorization": f"Bearer {oe_token}"}, timeout=10)  # fmt: skip
    with as_oe:
        base = f"/api/v1/namespaces/{ns}/secrets"
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "data": {}}
        for name in ("bot-runtime-token", "mcp-oauth-crm3", "llm-keys"):
            refused = as_oe.put(f"{base}/{name}", json={**body, "metadata": {"name": name}})
            assert refused.status_code == 403, (name, refused.text)
        assert as_oe.get(f"{base}/mcp-oauth-crm2").status_code == 403
        assert as_oe.post(base, json={**body, "metadata": {"name": "mcp-oauth-new"}}).status_code == 403
        assert as_oe.get(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/connectors/crm3").status_code == 403
        assert as_oe.get(f"/api/v1/namespaces/{other_ns}/secrets").status_code == 403

    # The Agent stops using the connector: its Role and binding go (never one with no names, which would
    # grant every name); the Secret, a person's consent, stays.
    patched = api.http.patch(
        api.path("agents", "bot"), content=json.dumps({"spec": {"connectors": []}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )  # fmt: skip
    assert patched.is_success, patched.text
    wait_for("the Role gone", lambda: _rbac(api, "roles", "bot-mcp-consent") is None, timeout=60)
    assert _rbac(api, "rolebindings", "bot-mcp-consent") is None
    assert _secret_file(api) is not None

    # No token anywhere a person or a log reads.
    tokens = [t for f in (first, second) for t in (f["tokens"]["access_token"], f["tokens"]["refresh_token"])]
    texts = [json.dumps(api.get("connectors", n)) for n in ("crm2", "crm3")]
    texts += [json.dumps(api.get("agents", "bot")), json.dumps(_rbac(api, "roles", "bot-mcp-consent"))]
    texts += [json.dumps(api.events(name)) for name in ("crm2", "bot")]
    texts += [operator.process.output(), oe.outputs(), *alice.pages, *mallory.pages]
    for token in tokens:
        assert not [t for t in texts if token in t]


def _echo(port: int, token: str, tool: str) -> dict[str, Any]:
    answer = httpx.post(
        f"http://127.0.0.1:{port}/execute",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "tool": tool,
            "arguments": {"text": "hi"},
            "execution_id": f"e-{time.monotonic_ns()}",
            "step": 1,
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_consent_form_in_chromium_takes_no_url_and_keeps_the_token_in_the_secret(
    world: World,
    console_for: Callable[..., Console],  # noqa: F811 - the fixture
) -> None:
    """The same consent as a person gives it: Chromium signs in, opens the form (no URL field), follows
    the link to the authorization server and lands on the OE's callback page; the Secret holds the file."""
    alice = console_for(world.oe.oe_url)
    alice.sign_in(world.people["alice"])
    alice.page.wait_for_url("**/console/inbox")
    alice.page.goto(alice.url(f"/console/connectors/consent?agent={world.ns}/bot&connector=crm2"))
    expect(alice.page.locator("#consent-agent")).to_have_value(f"{world.ns}/bot")
    assert alice.page.locator("#consent-url").count() == 0
    alice.page.click("#consent-start")
    link = alice.page.wait_for_selector("#consent-continue", timeout=15_000)
    assert link is not None and (link.get_attribute("href") or "").startswith(world.peer.issuer)
    alice.page.click("#consent-continue")
    alice.page.wait_for_selector("#consent-done", timeout=15_000)
    kept = _secret_file(world.api)
    assert kept is not None and kept["tokens"]["refresh_token"] and kept["resource"] == world.peer.url
    page = alice.page.content()
    assert kept["tokens"]["access_token"] not in page and kept["tokens"]["refresh_token"] not in page
    assert kept["tokens"]["refresh_token"] not in world.oe.outputs()

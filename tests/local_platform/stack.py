"""The whole platform on one machine, as `make run` shows it: a real control plane, the chart, the operator,
the OE and the Agent's components as local processes, with loopback stand-ins for the outside world.

What is real: the API server and everything the operator and the chart put in it (CRDs, RBAC, the rendered
Deployments, bundle ConfigMaps, token and registration Secrets), the operator (as the chart's ServiceAccount),
the OE (the chart's Deployment's env: it asks this API server who each client is and what it may do; the
demo's client is a ServiceAccount with an audience-bound token), the AER and Tool Pod (the operator's
rendered containers). What stands in: KWOK nodes for the kubelet (the containers run here as processes
instead), a loopback provider for the Connector's API, a loopback chat-completions peer for the model, and
loopback addresses for the Services' DNS names (so the OE reads the registration the operator published
with its URLs rewritten).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from agent_operator.registration import registration_secret_name
from agent_runtime.execution_token import SIGNING_KEY_FILE_ENV, generate_private_key_pem, public_key_pem
from agent_runtime.oe.registration import REGISTRATION_KEY
from tests.cluster.controlplane import ControlPlane, ensure_binaries
from tests.cluster.processes import Child, start_child, stop_all
from tests.conftest import REPO_ROOT, free_port, wait_for_port
from tests.install_flow import RELEASE, Kube, eventually, helm_install, wait_agent_ready
from tests.providers.llm_peer import Turn
from tests.rendered_pods import rendered_container_env

SYSTEM_NAMESPACE = "agent-engine"
# The chart's default oe.registrations.namespace: registrations apart from every other Secret.
REGISTRATIONS_NAMESPACE = f"{SYSTEM_NAMESPACE}-registrations"
APP_NAMESPACE = "demo"
AGENT = "echo-agent"
EXAMPLE_AGENT_DIR = REPO_ROOT / "examples" / "echo-agent"
EXAMPLE_MANIFEST = REPO_ROOT / "examples" / "kubernetes" / "echo-agent.yaml"
PROVIDER_TOKEN = "demo-provider-token"
LLM_KEY = "demo-llm-key"  # the loopback model peer's demo key, not a real one
# The demo's person at the client API (issue 28): a ServiceAccount with a token for the OE's audience.
CLIENT = "demo-user"
CLIENT_AUDIENCE = "agent-engine"
TOKEN_DURATION = "24h"  # the run's tokens are minted once; a longer `make run` mints new ones by hand
DEMO_TEXT = "Count the words in 'hello brave new world', echo 'hello', and sign that sentence."

# The model's side of the demo: first tools that just run, then one that needs a reviewer, then the answer.
# After these the peer's rule-based brain answers whatever is asked next.
DEMO_SCRIPT = [
    Turn.calls(("word_count", {"text": "hello brave new world"}), ("echo_getEcho", {"word": "hello"})),
    Turn.calls(("sign_message", {"message": "hello brave new world"})),
    Turn.answer("'hello brave new world' has 4 words; the provider echoed 'hello'; the sentence is signed."),
]

Say = Callable[[str], None]


def client_token_command() -> str:
    """How a person gets a token the OE accepts for the demo's identity."""
    return f"kubectl create token {CLIENT} --namespace {APP_NAMESPACE} --audience {CLIENT_AUDIENCE}"


@dataclass
class LocalPlatform:
    """Start with `up()`, stop with `down()`; `down()` leaves no process and no directory."""

    say: Say = print
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agent-engine-run-")))
    cluster: ControlPlane | None = None
    kube: Kube | None = None
    children: list[Child] = field(default_factory=list)
    oe_url: str = ""
    client_token: str = ""
    tool_pod_refused_runtime_token: int = 0

    # --- start ----------------------------------------------------------------------------------------

    def up(self) -> None:
        self.say(f"      work directory {self.workdir}")
        self.say("[1/6] control plane: etcd, kube-apiserver, controller-manager, scheduler, a KWOK node")
        bin_dir = ensure_binaries(echo=True)
        self.cluster = ControlPlane(bin_dir=bin_dir, nodes=1)
        self.cluster.start()
        self.say(f"      control plane directory {self.cluster.work_dir}")
        self.kube = Kube(bin_dir=bin_dir, env=self.cluster.env())
        self.say(f"      API server {self.cluster.server}")

        self.say("[2/6] helm install the chart (CRDs, RBAC, the operator's and the OE's objects)")
        helm_install(self.kube, namespace=SYSTEM_NAMESPACE)
        self._make_oe_keys()
        self._start_operator()

        self.say("[3/6] loopback stand-ins: the Connector's provider API and a chat-completions model")
        provider_port, peer_port = free_port(), free_port()
        self._spawn(
            "provider",
            [sys.executable, "-m", "echo_agent.provider", "--port", str(provider_port)],
            env={"PYTHONPATH": str(EXAMPLE_AGENT_DIR), "ECHO_PROVIDER_TOKEN": PROVIDER_TOKEN},
            port=provider_port,
        )
        script = self.workdir / "llm-script.json"
        script.write_text(
            json.dumps([turn.model_dump(mode="json", exclude_none=True) for turn in DEMO_SCRIPT])
        )
        self._spawn(
            "llm-peer",
            [sys.executable, "-m", "tests.providers.llm_peer", "--port", str(peer_port), "--api-key", LLM_KEY,
             "--script", str(script)],
            env={"PYTHONPATH": str(REPO_ROOT)},
            port=peer_port,
        )  # fmt: skip

        self.say(f"[4/6] kubectl apply the example Agent in namespace {APP_NAMESPACE}; waiting for Ready")
        self._apply_example(
            provider_url=f"http://127.0.0.1:{provider_port}", llm_url=f"http://127.0.0.1:{peer_port}/v1"
        )
        agent = wait_agent_ready(self.kube, namespace=APP_NAMESPACE, agent=AGENT, timeout=180)
        bundle = agent["status"]["bundle"]
        self.say(f"      Ready: bundle {bundle['digest'][:12]}, {bundle['toolCount']} connector tools")

        self.say(
            "[5/6] the OE and the Agent's AER and Tool Pod, run from what the chart and the operator rendered"
        )
        self._start_oe_and_agent()
        self.say(f"[6/6] ready: the OE serves {self.oe_url}")

    def _spawn(self, name: str, argv: list[str], *, env: dict[str, str], port: int | None = None) -> Child:
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir), **env}
        child = start_child(name, argv, log_dir=self.workdir, env=full_env, cwd=self.workdir)
        self.children.append(child)
        if port is not None:
            try:
                wait_for_port("127.0.0.1", port, timeout=60, proc=child.popen)
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(f"{name} did not start: {exc}\n{child.tail()}") from None
        return child

    def _start_operator(self) -> None:
        assert self.cluster is not None and self.kube is not None
        deployment = self.kube.get_json("deployment", f"{RELEASE}-operator", "--namespace", SYSTEM_NAMESPACE)
        pod = deployment["spec"]["template"]["spec"]
        kubeconfig = self.cluster.service_account_kubeconfig(
            namespace=SYSTEM_NAMESPACE,
            name=pod["serviceAccountName"],
            path=self.workdir / "operator.kubeconfig",
        )
        env = {e["name"]: e.get("value", "") for e in pod["containers"][0]["env"] if "value" in e}
        env |= {
            "KUBECONFIG": str(kubeconfig),
            "AGENT_OPERATOR_LIVENESS": f"http://127.0.0.1:{free_port()}/healthz",
            "AGENT_OPERATOR_LOG_FORMAT": "text",
            "PYTHONPATH": str(REPO_ROOT),
            # The OE's public key, rendered into the Agent's namespace and mounted in its pods (issue 27).
            "AGENT_OPERATOR_OE_PUBLIC_KEY_FILE": str(self.workdir / "oe-keys" / "public-key.pem"),
        }
        self._spawn("operator", [sys.executable, "-m", "agent_operator"], env=env)
        self.say(f"      operator running as ServiceAccount {SYSTEM_NAMESPACE}/{pod['serviceAccountName']}")

    def _apply_example(self, *, provider_url: str, llm_url: str) -> None:
        assert self.kube is not None
        self.kube.kubectl("create", "namespace", APP_NAMESPACE)
        documents = [doc for doc in yaml.safe_load_all(EXAMPLE_MANIFEST.read_text()) if doc]
        for doc in documents:
            if doc["kind"] == "Connector":
                doc["spec"]["source"]["baseUrl"] = provider_url  # where the stand-in provider listens
            if doc["kind"] == "Secret":
                doc["stringData"]["token"] = PROVIDER_TOKEN
            if doc["kind"] == "Agent":
                doc["spec"]["llm"] = {
                    "baseUrl": llm_url,
                    "model": "demo-model",
                    "credentials": [
                        {"name": "OPENAI_API_KEY", "secretKeyRef": {"name": "llm-key", "key": "key"}}
                    ],
                }
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "llm-key"},
                "stringData": {"key": LLM_KEY},
            }
        )
        self.kube.kubectl(
            "apply", "--namespace", APP_NAMESPACE, "-f", "-", stdin=yaml.safe_dump_all(documents)
        )

    def _start_oe_and_agent(self) -> None:
        assert self.kube is not None
        self.oe_url = f"http://127.0.0.1:{free_port()}"
        runtimes: dict[str, int] = {}
        for component in ("tool", "aer"):
            name = f"{AGENT}-{component}"
            deployment = self.kube.get_json("deployment", name, "--namespace", APP_NAMESPACE)
            port = free_port()
            overrides = {"RUNTIME_PORT": str(port), "APP_HOST": "127.0.0.1", "HOSTNAME": f"{name}-local"}
            if component == "aer":
                overrides["AGENTIC_OE_URL"] = self.oe_url  # the Service DNS name, as a loopback address
            self._run_rendered(deployment, APP_NAMESPACE, name=name, overrides=overrides, port=port)
            runtimes[component] = port

        registration = self._published_registration()
        registration["aerUrl"] = f"http://127.0.0.1:{runtimes['aer']}"
        registration["toolUrl"] = f"http://127.0.0.1:{runtimes['tool']}"
        registrations = self.workdir / "registrations"
        registrations.mkdir(exist_ok=True)
        (registrations / f"{APP_NAMESPACE}.{AGENT}.json").write_text(json.dumps(registration))

        deployment = self.kube.get_json("deployment", f"{RELEASE}-oe", "--namespace", SYSTEM_NAMESPACE)
        self.client_token = self._client_identity()
        port = int(self.oe_url.rsplit(":", 1)[1])
        overrides = {
            "RUNTIME_PORT": str(port),
            "APP_HOST": "127.0.0.1",
            "OE_SQLITE_PATH": str(self.workdir / "oe" / "oe.sqlite3"),
            "OE_REGISTRATIONS_DIR": str(registrations),
            # The chart's OE_CLIENT_AUTH=kubernetes asks this API server, as the OE's own ServiceAccount.
            **self._oe_in_cluster_env(deployment),
            SIGNING_KEY_FILE_ENV: str(self.workdir / "oe-keys" / "signing-key.pem"),
        }
        self._run_rendered(deployment, SYSTEM_NAMESPACE, name="oe", overrides=overrides, port=port)
        # What an AER (or tenant code in it) holds does not open its Tool Pod: only the OE's statements do.
        refused = httpx.post(
            f"http://127.0.0.1:{runtimes['tool']}/execute",
            json={"tool": "anything", "arguments": {}, "execution_id": "x", "step": 1},
            headers={"authorization": f"Bearer {registration['token']}"},
            timeout=10,
        )
        self.tool_pod_refused_runtime_token = refused.status_code
        self.say(f"      the Tool Pod refuses the AER's runtime token: HTTP {refused.status_code}")

    def _make_oe_keys(self) -> None:
        """The OE's signing key and its public key, as an operator makes them before an install."""
        directory = self.workdir / "oe-keys"
        directory.mkdir(exist_ok=True)
        pem = generate_private_key_pem()
        (directory / "signing-key.pem").write_text(pem)
        (directory / "public-key.pem").write_text(public_key_pem(pem))

    def _client_identity(self) -> str:
        """The demo's person: ServiceAccount CLIENT in the Agent's namespace, bound to the chart's invoker and
        reviewer ClusterRoles, and its token for the OE's audience (what `kubectl create token` gives)."""
        assert self.kube is not None
        self.kube.kubectl("create", "serviceaccount", CLIENT, "--namespace", APP_NAMESPACE)
        for role in ("invoker", "reviewer"):
            self.kube.kubectl(
                "create", "rolebinding", f"{CLIENT}-{role}", "--namespace", APP_NAMESPACE,
                f"--clusterrole={RELEASE}-{role}", f"--serviceaccount={APP_NAMESPACE}:{CLIENT}",
            )  # fmt: skip
        self.say(
            f"      client identity: ServiceAccount {APP_NAMESPACE}/{CLIENT} bound to {RELEASE}-invoker and "
            f"{RELEASE}-reviewer; token: {client_token_command()}"
        )
        return self._token(CLIENT, APP_NAMESPACE, audience=CLIENT_AUDIENCE)

    def _oe_in_cluster_env(self, deployment: dict[str, Any]) -> dict[str, str]:
        """What a pod of the OE's Deployment would find: the API server's address and its ServiceAccount's
        mount (a token for the API server's own audience and the cluster CA), laid out in a directory."""
        assert self.cluster is not None
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        mount = self.workdir / "oe-serviceaccount"
        mount.mkdir(exist_ok=True)
        (mount / "token").write_text(self._token(account, SYSTEM_NAMESPACE))
        (mount / "ca.crt").write_bytes(self.cluster.ca.cert_pem)
        return {
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.cluster.apiserver_port),
            "OE_SERVICEACCOUNT_DIR": str(mount),
        }

    def _token(self, account: str, namespace: str, *, audience: str | None = None) -> str:
        assert self.kube is not None
        audiences = ("--audience", audience) if audience else ()
        return self.kube.kubectl(
            "create", "token", account, "--namespace", namespace, *audiences, f"--duration={TOKEN_DURATION}"
        ).strip()

    def _published_registration(self) -> dict[str, Any]:
        """The registration the operator published for the OE (Decision 12)."""
        name = registration_secret_name(APP_NAMESPACE, AGENT)

        def read() -> dict[str, Any] | None:
            data = self._secret(REGISTRATIONS_NAMESPACE, name)
            return json.loads(data[REGISTRATION_KEY]) if REGISTRATION_KEY in data else None

        where = f"{REGISTRATIONS_NAMESPACE}/{name}"
        return eventually(f"the operator to publish Secret {where}", read, timeout=60)

    def _secret(self, namespace: str, name: str) -> dict[str, str]:
        assert self.kube is not None
        data = self.kube.get_json("secret", name, "--namespace", namespace).get("data") or {}
        return {key: base64.b64decode(value).decode() for key, value in data.items()}

    def _run_rendered(
        self, deployment: dict[str, Any], namespace: str, *, name: str, overrides: dict[str, str], port: int
    ) -> None:
        assert self.kube is not None
        pod = deployment["spec"]["template"]["spec"]
        config_maps: dict[str, dict[str, str]] = {}
        secrets: dict[str, dict[str, str]] = {}
        for volume in pod.get("volumes", []):
            for source in volume.get("projected", {}).get("sources", []):
                cm = self.kube.get_json("configmap", source["configMap"]["name"], "--namespace", namespace)
                config_maps[source["configMap"]["name"]] = cm.get("data") or {}
            if "configMap" in volume:  # the OE's public key
                cm = self.kube.get_json("configmap", volume["configMap"]["name"], "--namespace", namespace)
                config_maps[volume["configMap"]["name"]] = cm.get("data") or {}
            if "secret" in volume:
                secrets[volume["secret"]["secretName"]] = self._secret(
                    namespace, volume["secret"]["secretName"]
                )
        for item in pod["containers"][0].get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref and ref["name"] not in secrets:
                secrets[ref["name"]] = self._secret(namespace, ref["name"])
        root = self.workdir / name
        argv, env = rendered_container_env(
            deployment=deployment, config_maps=config_maps, secrets=secrets, root=root
        )
        env |= {"PYTHONPATH": f"{EXAMPLE_AGENT_DIR}{os.pathsep}{REPO_ROOT}", **overrides}
        self._spawn(name, argv, env=env, port=port)
        ready = f"http://127.0.0.1:{port}/readyz"
        eventually(
            f"{name} ready", lambda: httpx.get(ready, timeout=2).status_code == 200, timeout=60, interval=0.2
        )

    # --- the client's side --------------------------------------------------------------------------

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.oe_url, headers={"authorization": f"Bearer {self.client_token}"}, timeout=60
        )

    def follow(self, execution_id: str, *, after: int = 0) -> Iterator[dict[str, Any]]:
        """The execution's events as they happen, until it ends or suspends."""
        with (
            self.client() as client,
            client.stream(
                "GET", f"/execution/{execution_id}/events", params={"after": after}, timeout=None
            ) as stream,
        ):
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                yield event
                if event["type"] in ("suspended", "completed", "failed", "cancelled"):
                    return

    # --- stop -------------------------------------------------------------------------------------------

    def down(self) -> None:
        stop_all(self.children)
        self.children.clear()
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        shutil.rmtree(self.workdir, ignore_errors=True)

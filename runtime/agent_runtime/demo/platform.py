"""The whole platform on one machine, as `make run` shows it: a real control plane, the chart, the operator,
the OE and the Agent's components as local processes, with loopback stand-ins for the outside world.

What is real: the API server and everything the operator and the chart put in it (CRDs, RBAC, the rendered
Deployments, bundle ConfigMaps, token and registration Secrets), the operator (as the chart's ServiceAccount),
the OE (the chart's Deployment's env: it asks this API server who each client is and what it may do; the
demo's client is a ServiceAccount with an audience-bound token), the AER and Tool Pod (the operator's
rendered containers). What stands in: KWOK nodes for the kubelet (the containers run here as processes
instead), the example's own provider for the Connector's API, the scripted model for the model, and
loopback addresses for the Services' DNS names (so the OE reads the registration the operator published
with its URLs rewritten).

The control plane is not the product's: it is a separate program named by $AGENT_ENGINE_CONTROL_PLANE
(`make run` gives the test tier's, which builds etcd, kube-apiserver and KWOK with go), started as a child
process that writes where it listens into a state file. Nothing here imports it.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from agent_runtime.demo.kube import Kube, StepFailed, eventually
from agent_runtime.demo.rendered import rendered_container_env
from agent_runtime.devloop.children import Child, free_port, start_child, stop_all
from agent_runtime.devloop.scripted_model import ScriptedCall, ScriptedTurn
from agent_runtime.execution_token import SIGNING_KEY_FILE_ENV, generate_private_key_pem, public_key_pem
from agent_runtime.oe.registration import REGISTRATION_KEY, REGISTRATION_LABEL

# The program that runs a control plane in the foreground until SIGTERM, writing {"kubeconfig", "server",
# "work_dir", "bin_dir"} to the file after `--state-file` once it serves: a command line in this variable.
# `make run` sets it to the test tier's (`python -m tests.cluster.controlplane serve --nodes 1`).
CONTROL_PLANE_ENV = "AGENT_ENGINE_CONTROL_PLANE"
CONTROL_PLANE_TIMEOUT_S = 900.0  # the first run builds the binaries with go

RELEASE = "agent-engine"
SYSTEM_NAMESPACE = "agent-engine"
# The chart's default oe.registrations.namespace: registrations apart from every other Secret.
REGISTRATIONS_NAMESPACE = f"{SYSTEM_NAMESPACE}-registrations"
APP_NAMESPACE = "demo"
AGENT = "echo-agent"
PROVIDER_TOKEN = "demo-provider-token"  # noqa: S105 (the example provider's demo credential)
LLM_KEY = "demo-llm-key"  # the stand-in model's demo key, not a real one
# The demo's person at the client API (issue 28): a ServiceAccount with a token for the OE's audience.
CLIENT = "demo-user"
CLIENT_AUDIENCE = "agent-engine"
TOKEN_DURATION = "24h"  # noqa: S105 (the run's tokens are minted once; a longer run mints new ones by hand)
DEMO_TEXT = "Count the words in 'hello brave new world', echo 'hello', and sign that sentence."

# The model's side of the demo: first tools that just run, then one that needs a reviewer, then the answer.
# After these the stand-in's brain answers whatever is asked next.
DEMO_SCRIPT = [
    ScriptedTurn(
        tool_calls=[
            ScriptedCall(name="word_count", args={"text": "hello brave new world"}),
            ScriptedCall(name="echo_getEcho", args={"word": "hello"}),
        ]
    ),
    ScriptedTurn(tool_calls=[ScriptedCall(name="sign_message", args={"message": "hello brave new world"})]),
    ScriptedTurn(
        text="'hello brave new world' has 4 words; the provider echoed 'hello'; the sentence is signed."
    ),
]

Say = Callable[[str], None]


class PlatformError(RuntimeError):
    """A step of `make run` failed; the message says which and why."""


def client_token_command() -> str:
    """How a person gets a token the OE accepts for the demo's identity."""
    return f"kubectl create token {CLIENT} --namespace {APP_NAMESPACE} --audience {CLIENT_AUDIENCE}"


@dataclass
class LocalPlatform:
    """Start with `up()`, stop with `down()`; `down()` leaves no process and no directory."""

    repo: Path
    say: Say = print
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agent-engine-run-")))
    kube: Kube | None = None
    children: list[Child] = field(default_factory=list)
    control_plane: Child | None = None
    state: dict[str, Any] = field(default_factory=dict)
    oe_url: str = ""
    client_token: str = ""
    tool_pod_refused_runtime_token: int = 0

    @property
    def chart(self) -> Path:
        return self.repo / "charts" / "agent-engine"

    @property
    def example_dir(self) -> Path:
        return self.repo / "examples" / "echo-agent"

    @property
    def kubeconfig(self) -> str:
        return str(self.state.get("kubeconfig", ""))

    # --- start ----------------------------------------------------------------------------------------

    def up(self) -> None:
        self.say(f"      work directory {self.workdir}")
        self.say("[1/6] control plane: etcd, kube-apiserver, controller-manager, scheduler, a KWOK node")
        self._start_control_plane()
        self.say(f"      control plane directory {self.state['work_dir']}")
        self.say(f"      API server {self.state['server']}")

        self.say("[2/6] helm install the chart (CRDs, RBAC, the operator's and the OE's objects)")
        assert self.kube is not None
        self.kube.helm(
            "install", RELEASE, str(self.chart), "--namespace", SYSTEM_NAMESPACE, "--create-namespace",
            "--wait=false",
        )  # fmt: skip
        self._make_oe_keys()
        self._start_operator()

        self.say("[3/6] loopback stand-ins: the Connector's provider API and a chat-completions model")
        provider_port, model_port = free_port(), free_port()
        self._spawn(
            "provider",
            [sys.executable, "-m", "echo_agent.provider", "--port", str(provider_port)],
            env={"PYTHONPATH": str(self.example_dir), "ECHO_PROVIDER_TOKEN": PROVIDER_TOKEN},
            port=provider_port,
        )
        script = self.workdir / "model-script.json"
        script.write_text(json.dumps([turn.model_dump(exclude_none=True) for turn in DEMO_SCRIPT]))
        self._spawn(
            "model",
            [sys.executable, "-m", "agent_runtime.devloop.scripted_model", "--port", str(model_port),
             "--script", str(script)],
            env={},
            port=model_port,
        )  # fmt: skip

        self.say(f"[4/6] kubectl apply the example Agent in namespace {APP_NAMESPACE}; waiting for Ready")
        self._apply_example(
            provider_url=f"http://127.0.0.1:{provider_port}", llm_url=f"http://127.0.0.1:{model_port}/v1"
        )
        agent = self._wait_agent_ready()
        bundle = agent["status"]["bundle"]
        self.say(f"      Ready: bundle {bundle['digest'][:12]}, {bundle['toolCount']} connector tools")

        self.say(
            "[5/6] the OE and the Agent's AER and Tool Pod, run from what the chart and the operator rendered"
        )
        self._start_oe_and_agent()
        self.say(f"[6/6] ready: the OE serves {self.oe_url}")

    def _start_control_plane(self) -> None:
        state_file = self.workdir / "control-plane.json"
        command = os.environ.get(CONTROL_PLANE_ENV, "").strip()
        if not command:
            raise PlatformError(
                f"no control plane: set {CONTROL_PLANE_ENV} to the command that runs one "
                "(make run sets it: python -m tests.cluster.controlplane serve --nodes 1)"
            )
        argv = [*shlex.split(command), "--state-file", str(state_file)]
        env = {**os.environ, "PYTHONPATH": str(self.repo)}
        self.control_plane = start_child("control-plane", argv, log_dir=self.workdir, env=env, cwd=self.repo)
        deadline = time.monotonic() + CONTROL_PLANE_TIMEOUT_S
        while not state_file.exists():
            if not self.control_plane.alive():
                raise PlatformError(f"the control plane exited:\n{self.control_plane.tail(3000)}")
            if time.monotonic() > deadline:
                raise PlatformError(f"the control plane did not start in {CONTROL_PLANE_TIMEOUT_S:.0f}s")
            time.sleep(0.2)
        self.state = json.loads(state_file.read_text())
        bin_dir = Path(self.state["bin_dir"])
        env = {
            **os.environ,
            "KUBECONFIG": self.kubeconfig,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        # helm keeps state in these; keep it out of the user's home.
        for var, sub in (
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ):
            env[var] = str(self.workdir / "helm" / sub)
        self.kube = Kube(bin_dir=bin_dir, env=env)

    def _spawn(self, name: str, argv: list[str], *, env: dict[str, str], port: int | None = None) -> Child:
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir), **env}
        child = start_child(name, argv, log_dir=self.workdir, env=full_env, cwd=self.workdir)
        self.children.append(child)
        if port is not None:
            self._wait_port(child, port)
        return child

    def _wait_port(self, child: Child, port: int) -> None:
        import socket

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not child.alive():
                raise PlatformError(f"{child.name} did not start:\n{child.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise PlatformError(f"{child.name} not listening on {port} after 60s:\n{child.tail()}")

    def _start_operator(self) -> None:
        assert self.kube is not None
        deployment = self.kube.get_json("deployment", f"{RELEASE}-operator", "--namespace", SYSTEM_NAMESPACE)
        pod = deployment["spec"]["template"]["spec"]
        kubeconfig = self._token_kubeconfig(
            self._token(pod["serviceAccountName"], SYSTEM_NAMESPACE),
            namespace=SYSTEM_NAMESPACE,
            path=self.workdir / "operator.kubeconfig",
        )
        env = {e["name"]: e.get("value", "") for e in pod["containers"][0]["env"] if "value" in e}
        env |= {
            "KUBECONFIG": str(kubeconfig),
            "AGENT_OPERATOR_LIVENESS": f"http://127.0.0.1:{free_port()}/healthz",
            "AGENT_OPERATOR_LOG_FORMAT": "text",
            # The OE's public key, rendered into the Agent's namespace and mounted in its pods (issue 27).
            "AGENT_OPERATOR_OE_PUBLIC_KEY_FILE": str(self.workdir / "oe-keys" / "public-key.pem"),
        }
        self._spawn("operator", [sys.executable, "-m", "agent_operator"], env=env)
        self.say(f"      operator running as ServiceAccount {SYSTEM_NAMESPACE}/{pod['serviceAccountName']}")

    def _cluster_ca(self) -> bytes:
        document = yaml.safe_load(Path(self.kubeconfig).read_text())
        cluster = document["clusters"][0]["cluster"]
        if "certificate-authority-data" in cluster:
            return base64.b64decode(cluster["certificate-authority-data"])
        return Path(cluster["certificate-authority"]).read_bytes()

    def _token_kubeconfig(self, token: str, *, namespace: str, path: Path) -> Path:
        """A kubeconfig for a ServiceAccount's token, as its pod would see the API server."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.state["server"],
                        "certificate-authority-data": base64.b64encode(self._cluster_ca()).decode(),
                    },
                }
            ],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [
                {"name": "sa", "context": {"cluster": "local", "user": "sa", "namespace": namespace}}
            ],
            "current-context": "sa",
        }
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            yaml.safe_dump(document, handle)
        return path

    def _apply_example(self, *, provider_url: str, llm_url: str) -> None:
        assert self.kube is not None
        self.kube.kubectl("create", "namespace", APP_NAMESPACE)
        manifest = self.repo / "examples" / "kubernetes" / "echo-agent.yaml"
        documents = [doc for doc in yaml.safe_load_all(manifest.read_text()) if doc]
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

    def _wait_agent_ready(self) -> dict[str, Any]:
        assert self.kube is not None
        kube = self.kube

        def ready() -> bool:
            status = kube.get_json("agent", AGENT, "--namespace", APP_NAMESPACE).get("status") or {}
            return any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
            )

        eventually(f"Agent {APP_NAMESPACE}/{AGENT} Ready", ready, timeout=180)
        return kube.get_json("agent", AGENT, "--namespace", APP_NAMESPACE)

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
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        mount = self.workdir / "oe-serviceaccount"
        mount.mkdir(exist_ok=True)
        (mount / "token").write_text(self._token(account, SYSTEM_NAMESPACE))
        (mount / "ca.crt").write_bytes(self._cluster_ca())
        return {
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(urlsplit(self.state["server"]).port),
            "OE_SERVICEACCOUNT_DIR": str(mount),
        }

    def _token(self, account: str, namespace: str, *, audience: str | None = None) -> str:
        assert self.kube is not None
        audiences = ("--audience", audience) if audience else ()
        return self.kube.kubectl(
            "create", "token", account, "--namespace", namespace, *audiences, f"--duration={TOKEN_DURATION}"
        ).strip()

    def _published_registration(self) -> dict[str, Any]:
        """The registration the operator published for the OE (Decision 12), found by its label."""
        assert self.kube is not None
        kube = self.kube

        def read() -> dict[str, Any] | None:
            listing = kube.get_json(
                "secret", "--namespace", REGISTRATIONS_NAMESPACE, "-l", REGISTRATION_LABEL
            ).get("items", [])
            for secret in listing:
                data = secret.get("data") or {}
                if REGISTRATION_KEY in data:
                    document = json.loads(base64.b64decode(data[REGISTRATION_KEY]))
                    if document.get("agent") == f"{APP_NAMESPACE}/{AGENT}":
                        return dict(document)
            return None

        return eventually(f"the operator to publish {APP_NAMESPACE}/{AGENT}'s registration", read, timeout=60)

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
        env |= {"PYTHONPATH": str(self.example_dir), **overrides}
        child = self._spawn(name, argv, env=env, port=port)
        ready = f"http://127.0.0.1:{port}/readyz"
        try:
            eventually(
                f"{name} ready",
                lambda: httpx.get(ready, timeout=2).status_code == 200,
                timeout=60,
                interval=0.2,
            )
        except StepFailed as exc:
            raise PlatformError(f"{exc}\n{child.tail()}") from None

    # --- stop -------------------------------------------------------------------------------------------

    def down(self) -> None:
        stop_all(self.children)
        self.children.clear()
        if self.control_plane is not None:
            # Its own SIGTERM handler stops etcd and the API server and removes its directory.
            self.control_plane.stop(grace=60)
            self.control_plane = None
        shutil.rmtree(self.workdir, ignore_errors=True)

"""Credentials and namespace from a kubeconfig, as kubectl reads them.

The user of the current (or named) context gives the bearer token: `token`, `tokenFile`, or an `exec`
plugin run as kubectl runs it (client.authentication.k8s.io/v1 ExecCredential on stdout). Reading the file
and choosing the entry are pure functions; running the plugin is the one piece of I/O.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_runtime.cli.errors import CliError

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_TIMEOUT_S = 60.0
# advice, not a token
TOKEN_FIX = (
    "pass --token, set AGENTENGINE_TOKEN, or mint one: kubectl create token NAME --audience agent-engine"  # noqa: S105
)


@dataclass(frozen=True)
class Context:
    """What the CLI takes from one kubeconfig context."""

    name: str
    namespace: str | None
    user: Mapping[str, Any]
    base_dir: Path  # relative paths in the user (tokenFile, exec command) are relative to its file
    cluster: Mapping[str, Any] = field(default_factory=dict)  # for an exec plugin's provideClusterInfo


def kubeconfig_paths(explicit: str | None, environ: Mapping[str, str]) -> list[Path]:
    """The files to read: --kubeconfig, else $KUBECONFIG (a path list), else ~/.kube/config."""
    if explicit:
        return [Path(explicit).expanduser()]
    listed = environ.get("KUBECONFIG", "")
    if listed:
        return [Path(part).expanduser() for part in listed.split(os.pathsep) if part]
    return [Path(environ.get("HOME", str(Path.home()))) / ".kube" / "config"]


def load_documents(paths: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Each existing file parsed; a file that is not a kubeconfig mapping is an error naming it."""
    import yaml  # here, not at the top: `--help` and commands given --token never need it

    documents = []
    for path in paths:
        if not path.is_file():
            continue
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise CliError(f"kubeconfig {path} is not valid YAML ({exc.__class__.__name__})") from None
        if not isinstance(loaded, dict):
            raise CliError(f"kubeconfig {path} is not a mapping; fix the file or pass --kubeconfig")
        documents.append((path, loaded))
    return documents


def _named(documents: list[tuple[Path, dict[str, Any]]], key: str, name: str) -> tuple[Path, dict[str, Any]]:
    # kubectl's merge rule: the first file that defines a name wins.
    for path, document in documents:
        for entry in document.get(key) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return path, entry
    return Path(), {}


def select_context(documents: list[tuple[Path, dict[str, Any]]], context: str | None) -> Context | None:
    """The named context, else the first file's current-context; None when there is no kubeconfig."""
    if not documents:
        if context:
            raise CliError(f"--context {context!r}: no kubeconfig found; pass --kubeconfig or set KUBECONFIG")
        return None
    name = context or next((d["current-context"] for _, d in documents if d.get("current-context")), None)
    if not name:
        return None
    path, entry = _named(documents, "contexts", name)
    if not entry:
        raise CliError(f"context {name!r} is not in the kubeconfig; see kubectl config get-contexts")
    body = entry.get("context") or {}
    user_name = body.get("user")
    user_path, user_entry = _named(documents, "users", user_name) if user_name else (path, {})
    _, cluster_entry = _named(documents, "clusters", body["cluster"]) if body.get("cluster") else (path, {})
    return Context(
        name=name,
        namespace=body.get("namespace") or None,
        user=user_entry.get("user") or {},
        base_dir=(user_path if user_entry else path).parent,
        cluster=cluster_entry.get("cluster") or {},
    )


# kubeconfig cluster keys an ExecCredential's spec.cluster carries under the same names
CLUSTER_INFO_KEYS = (
    "server",
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
)
EXEC_EXTENSION = "client.authentication.k8s.io/exec"


def cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """spec.cluster for a plugin that asks for it (provideClusterInfo), as kubectl fills it."""
    info = {key: cluster[key] for key in CLUSTER_INFO_KEYS if key in cluster}
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def exec_info(exec_spec: Mapping[str, Any], *, cluster: Mapping[str, Any] | None = None) -> str:
    """The KUBERNETES_EXEC_INFO kubectl hands the plugin (never interactive: the CLI may run in a script)."""
    spec: dict[str, Any] = {"interactive": False}
    if exec_spec.get("provideClusterInfo") and cluster:
        spec["cluster"] = cluster_info(cluster)
    return json.dumps(
        {
            "apiVersion": exec_spec.get("apiVersion", EXEC_API_VERSIONS[0]),
            "kind": "ExecCredential",
            "spec": spec,
        }
    )


def token_from_exec_output(stdout: str, *, command: str) -> str:
    """The bearer token of an ExecCredential, or an error naming the plugin (never its output)."""
    try:
        credential = json.loads(stdout)
    except ValueError:
        raise CliError(f"the exec plugin {command!r} printed no ExecCredential JSON") from None
    if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
        raise CliError(f"the exec plugin {command!r} printed JSON that is not an ExecCredential")
    if credential.get("apiVersion") not in EXEC_API_VERSIONS:
        raise CliError(
            f"the exec plugin {command!r} answered apiVersion {credential.get('apiVersion')!r}; "
            f"expected {EXEC_API_VERSIONS[0]}"
        )
    token = (credential.get("status") or {}).get("token")
    if not isinstance(token, str) or not token:
        raise CliError(
            f"the exec plugin {command!r} gave no status.token (a client certificate cannot reach the OE); "
            + TOKEN_FIX
        )
    return token


def run_exec_plugin(
    exec_spec: Mapping[str, Any], *, base_dir: Path, cluster: Mapping[str, Any] | None = None
) -> str:
    """Run the user's exec plugin as kubectl does (stdin closed: never interactive) and return its token."""
    command = str(exec_spec.get("command") or "")
    if not command:
        raise CliError("the kubeconfig user's exec has no command; fix the kubeconfig or " + TOKEN_FIX)
    if exec_spec.get("interactiveMode") == "Always":
        raise CliError(
            f"the exec plugin {command!r} needs a terminal (interactiveMode: Always); log in with it once "
            "through kubectl, or " + TOKEN_FIX
        )
    if os.sep in command and not Path(command).is_absolute():
        command = str(base_dir / command)
    env = dict(os.environ)
    for pair in exec_spec.get("env") or []:
        env[str(pair["name"])] = str(pair["value"])
    env["KUBERNETES_EXEC_INFO"] = exec_info(exec_spec, cluster=cluster)
    argv = [command, *[str(arg) for arg in exec_spec.get("args") or []]]
    try:
        done = subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=EXEC_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        hint = exec_spec.get("installHint") or "install it or fix the kubeconfig's exec.command"
        raise CliError(f"the exec plugin {command!r} was not found: {hint}") from None
    except subprocess.TimeoutExpired:
        raise CliError(f"the exec plugin {command!r} did not answer in {EXEC_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        # stderr is the plugin's own explanation (a login needed, an expired refresh token); stdout may hold
        # a credential and is never shown.
        last = (done.stderr.strip().splitlines() or ["no message"])[-1][:300]
        raise CliError(f"the exec plugin {command!r} failed (exit {done.returncode}): {last}")
    return token_from_exec_output(done.stdout, command=command)


def token_from_user(
    user: Mapping[str, Any], *, base_dir: Path, cluster: Mapping[str, Any] | None = None
) -> str | None:
    """The user's bearer token: `token`, else `tokenFile`, else its exec plugin; None when it has none."""
    if user.get("token"):
        return str(user["token"])
    if user.get("tokenFile"):
        path = Path(str(user["tokenFile"])).expanduser()
        path = path if path.is_absolute() else base_dir / path
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CliError(f"the kubeconfig user's tokenFile {path} is unreadable ({exc.strerror})") from None
    if isinstance(user.get("exec"), dict):
        return run_exec_plugin(user["exec"], base_dir=base_dir, cluster=cluster)
    return None

"""The CLI's credentials: flags over environment over the kubeconfig, and the kubeconfig read as kubectl
reads it (token, tokenFile, exec plugins run as real processes)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.cli.config import Options, resolve, sends_token_in_clear
from agent_runtime.cli.errors import CliError
from agent_runtime.cli.kubeconfig import (
    kubeconfig_paths,
    load_documents,
    select_context,
    token_from_exec_output,
    token_from_user,
)
from tests.exec_credential import exec_user

SERVER = {"AGENTENGINE_SERVER": "http://127.0.0.1:8080"}


def write_config(
    path: Path, *, current: str | None, contexts: dict[str, dict[str, Any]], users: dict
) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "contexts": [{"name": name, "context": body} for name, body in contexts.items()],
        "users": [{"name": name, "user": body} for name, body in users.items()],
    }
    if current:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


def plugin(tmp_path: Path, body: str) -> dict[str, Any]:
    script = tmp_path / "plugin.py"
    script.write_text(body)
    return {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)]}


def test_paths_follow_kubectl() -> None:
    assert kubeconfig_paths("/x/config", {"KUBECONFIG": "/a"}) == [Path("/x/config")]
    assert kubeconfig_paths(None, {"KUBECONFIG": f"/a{os.pathsep}/b"}) == [Path("/a"), Path("/b")]
    assert kubeconfig_paths(None, {"HOME": "/home/u"}) == [Path("/home/u/.kube/config")]


def test_current_context_namespace_and_a_token_file_relative_to_its_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("file-token\n")
    path = write_config(
        tmp_path / "config",
        current="a",
        contexts={"a": {"user": "u", "namespace": "team-a"}, "b": {"user": "v"}},
        users={"u": {"tokenFile": "tok"}, "v": {"token": "static-token"}},
    )
    documents = load_documents([path])
    context = select_context(documents, None)
    assert context is not None and (context.name, context.namespace) == ("a", "team-a")
    assert token_from_user(context.user, base_dir=context.base_dir) == "file-token"
    other = select_context(documents, "b")
    assert other is not None and other.namespace is None
    assert token_from_user(other.user, base_dir=other.base_dir) == "static-token"
    with pytest.raises(CliError, match="context 'c' is not in the kubeconfig"):
        select_context(documents, "c")


def test_the_first_file_of_kubeconfig_wins_a_name(tmp_path: Path) -> None:
    first = write_config(
        tmp_path / "one", current="a", contexts={"a": {"user": "u"}}, users={"u": {"token": "one"}}
    )
    second = write_config(tmp_path / "two", current="b", contexts={}, users={"u": {"token": "two"}})
    context = select_context(load_documents([first, second, tmp_path / "missing"]), None)
    assert context is not None and token_from_user(context.user, base_dir=context.base_dir) == "one"
    assert select_context([], None) is None


def test_an_exec_plugin_runs_as_kubectl_runs_it(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("exec-token")
    calls = tmp_path / "calls"
    assert (
        token_from_user(exec_user(token_file=token_file, calls_file=calls), base_dir=tmp_path) == "exec-token"
    )
    assert calls.read_text() == "login\n"

    # The plugin gets KUBERNETES_EXEC_INFO (non-interactive) and the user's env entries.
    echo = plugin(
        tmp_path,
        "import json, os\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "token = f\"{info['kind']}-{info['spec']['interactive']}-{os.environ['REGION']}\"\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
        " 'status': {'token': token}}))\n",
    )
    echo["env"] = [{"name": "REGION", "value": "eu"}]
    assert token_from_user({"exec": echo}, base_dir=tmp_path) == "ExecCredential-False-eu"


def test_a_failing_plugin_is_named_with_its_stderr_and_never_its_stdout(tmp_path: Path) -> None:
    failing = plugin(
        tmp_path,
        "import sys\nprint('leaked-credential-123')\nprint('login expired: run sso login', file=sys.stderr)\n"
        "sys.exit(3)\n",
    )
    with pytest.raises(CliError) as caught:
        token_from_user({"exec": failing}, base_dir=tmp_path)
    message = caught.value.format_message()
    assert "failed (exit 3): login expired: run sso login" in message
    assert "leaked-credential-123" not in message

    missing = {"command": "no-such-plugin-xyz", "installHint": "install no-such-plugin-xyz from your vendor"}
    with pytest.raises(CliError, match="was not found: install no-such-plugin-xyz"):
        token_from_user({"exec": missing}, base_dir=tmp_path)


def test_exec_output_is_checked() -> None:
    good = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "t"},
    }
    assert token_from_exec_output(json.dumps(good), command="p") == "t"
    with pytest.raises(CliError, match="no ExecCredential JSON"):
        token_from_exec_output("secret-not-json", command="p")
    with pytest.raises(CliError, match="apiVersion 'v9'"):
        token_from_exec_output(json.dumps({**good, "apiVersion": "v9"}), command="p")
    certificate = {**good, "status": {"clientCertificateData": "x", "clientKeyData": "y"}}
    with pytest.raises(CliError, match=r"no status\.token"):
        token_from_exec_output(json.dumps(certificate), command="p")


def test_flags_over_environment_over_the_kubeconfig(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "config",
        current="a",
        contexts={"a": {"user": "u", "namespace": "ctx-ns"}},
        users={"u": {"token": "kube"}},
    )
    env = {**SERVER, "KUBECONFIG": str(path)}
    assert resolve(Options(), env).token == "kube"
    assert resolve(Options(), env).namespace == "ctx-ns"
    assert resolve(Options(), {**env, "AGENTENGINE_TOKEN": "from-env"}).token == "from-env"
    flagged = resolve(Options(token="flag", namespace="n"), {**env, "AGENTENGINE_TOKEN": "from-env"})
    assert (flagged.token, flagged.namespace, flagged.server) == ("flag", "n", "http://127.0.0.1:8080")
    assert (
        resolve(Options(token="t"), {**SERVER, "KUBECONFIG": str(tmp_path / "none")}).namespace == "default"
    )


def test_missing_pieces_are_errors_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="pass --server URL or set AGENTENGINE_SERVER") as no_server:
        resolve(Options(token="t"), {})
    assert no_server.value.exit_code == 2
    with pytest.raises(CliError, match="not an http"):
        resolve(Options(server="127.0.0.1:8080", token="t"), {})
    certificate_only = write_config(
        tmp_path / "config",
        current="a",
        contexts={"a": {"user": "u"}},
        users={"u": {"client-certificate": "c"}},
    )
    with pytest.raises(CliError, match=r"has no token\): pass --token") as no_token:
        resolve(Options(), {**SERVER, "KUBECONFIG": str(certificate_only)})
    assert no_token.value.exit_code == 4
    (tmp_path / "broken").write_text("- just\n- a list\n")
    with pytest.raises(CliError, match="is not a mapping"):
        resolve(Options(), {**SERVER, "KUBECONFIG": str(tmp_path / "broken")})


def test_a_plugin_that_asks_for_cluster_info_gets_it_and_an_always_interactive_one_is_refused(
    tmp_path: Path,
) -> None:
    spec = plugin(
        tmp_path,
        "import json, os, sys\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "assert sys.stdin.read() == ''\n"  # stdin closed: a plugin cannot wait on a prompt
        "cluster = info['spec']['cluster']\n"
        "token = cluster['server'] + '|' + cluster['config']['audience']\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
        " 'status': {'token': token}}))\n",
    )
    spec["provideClusterInfo"] = True
    cluster = {
        "server": "https://127.0.0.1:6443",
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "ae"}}],
    }
    path = write_config(
        tmp_path / "config",
        current="a",
        contexts={"a": {"user": "u", "cluster": "c"}},
        users={"u": {"exec": spec}},
    )
    document = yaml.safe_load(path.read_text())
    document["clusters"] = [{"name": "c", "cluster": cluster}]
    path.write_text(yaml.safe_dump(document))
    assert resolve(Options(), {**SERVER, "KUBECONFIG": str(path)}).token == "https://127.0.0.1:6443|ae"

    with pytest.raises(CliError, match="needs a terminal"):
        token_from_user({"exec": {**spec, "interactiveMode": "Always"}}, base_dir=tmp_path)


def test_a_token_in_clear_is_only_plain_http_off_loopback() -> None:
    assert not sends_token_in_clear("http://127.0.0.1:8080")
    assert not sends_token_in_clear("http://[::1]:8080")
    assert not sends_token_in_clear("http://localhost:8080")
    assert not sends_token_in_clear("https://oe.example.internal")
    assert sends_token_in_clear("http://oe.example.internal:8080")
    assert sends_token_in_clear("http://10.0.0.5:8080")

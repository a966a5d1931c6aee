"""The install journey's `agentengine` step (issue 29): the real console script in a pseudo-terminal against
the chart's OE pod, found through the kubeconfig and reached through the port-forward the CLI opens itself.

People here are the journey's ServiceAccounts (tests/install_flow.py `client_identity`): the developer
(`edit` in the Agent's namespace: invoke, read, cancel) and the reviewer (the chart's reviewer ClusterRole:
approve, reject), each with a token for both the API server and the OE's audience, so one kubeconfig user
both opens the port-forward and is who the OE sees. A Role in the OE's namespace lets them find the OE and
port-forward to it, as a platform team grants `kubectl port-forward`. Their contexts are a kubeconfig of
their own, listed before the platform's (KUBECONFIG=theirs:platform's), whose cluster they name: the CLI
merges the files as kubectl does. The reviewer's token comes from an exec plugin.

After every command: its process is gone, nothing of its session is left, and the loopback port it
listened on (sampled from /proc while it ran) no longer accepts connections.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pexpect
import yaml

from tests.exec_credential import exec_user
from tests.install_flow import (
    CLIENT_AUDIENCE,
    EXAMPLE_AGENT,
    INVOKER,
    REVIEWER,
    Kube,
)
from tests.integration.cli.driver import SCRIPT, cli_env

HELD = {"message": "signed from the terminal"}
EDITED = {"message": "edited in the reviewer's $EDITOR"}
ANSWER = "signed what the reviewer edited"
# The model's turns for this step, after the journey's own (tests/install_flow.py LLM_SCRIPT): a held call
# approved with edited arguments and answered, one cancelled, one rejected (after a rejection the peer's
# deterministic brain answers, whether or not the model is asked again).
CLI_LLM_SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "sign_message", "args": HELD}]},
    {"text": ANSWER},
    {"tool_calls": [{"name": "sign_message", "args": HELD}]},
    {"tool_calls": [{"name": "sign_message", "args": HELD}]},
]
PORT_FORWARD_ROLE = "agent-engine-oe-port-forward"
DEVELOPER_CONTEXT = "journey-developer"
REVIEWER_CONTEXT = "journey-reviewer"
_TCP_LISTEN = "0A"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # Rich styles a table at a terminal


# What a command left behind ----------------------------------------------------------------------------


def _listening_inodes() -> dict[str, int]:
    """Socket inode -> port of every IPv4/IPv6 socket of this network namespace in LISTEN."""
    found: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _TCP_LISTEN:
                found[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return found


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its fds' socket inodes matched against /proc/net/tcp)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        return set()
    table = _listening_inodes()
    return {table[inode] for inode in inodes if inode in table}


def session_members(sid: int) -> list[int]:
    """Processes whose session is `sid` (pexpect makes each command a session leader)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces, so split after its ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:
            members.append(int(entry))
    return members


def accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Command:
    """One `agentengine` run in a pseudo-terminal, its listening ports sampled while it runs."""

    argv: tuple[str, ...]
    child: pexpect.spawn
    ports: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        # /proc only (no waitpid here: pexpect reaps the child in the test's thread).
        while not self._stop.is_set():
            self.ports |= listening_ports(self.child.pid)
            time.sleep(0.02)

    def expect(self, pattern: str, timeout: float = 60) -> str:
        self.child.expect(pattern, timeout=timeout)
        return str(self.child.after)

    def finish(self, *, code: int = 0) -> str:
        """Wait for the end; the exit code must be `code`; nothing of it may remain. Its whole output."""
        self.child.expect(pexpect.EOF, timeout=90)
        shown = _ANSI.sub("", str(self.child.before).replace("\r", ""))
        self.child.close()
        self._stop.set()
        status = self.child.exitstatus if self.child.exitstatus is not None else -1
        where = f"agentengine {' '.join(self.argv)}"
        assert status == code, f"{where} exited {status}, expected {code}:\n{shown}"
        assert "Traceback" not in shown, f"{where}:\n{shown}"
        # Nothing of its session is left (no helper process, no kubectl), and no port it listened on is open.
        leftovers = session_members(self.child.pid)
        assert not leftovers, f"{where} left processes {leftovers}"
        still = [port for port in self.ports if accepts(port)]
        assert not still, f"{where} left loopback ports listening: {still}"
        return shown


def first_json(shown: str) -> Any:
    """The JSON document a command printed (a terminal shows stderr's notes with it)."""
    value, _ = json.JSONDecoder().raw_decode(shown[shown.index("{") :])
    return value


def one_error_line(shown: str) -> str:
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    return lines[0]


# The kubeconfig ------------------------------------------------------------------------------------------


def token_audiences(token: str) -> list[str]:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    aud = claims.get("aud") or []
    return [aud] if isinstance(aud, str) else list(aud)


def person_token(kube: Kube, *, namespace: str, name: str) -> str:
    """A token of ServiceAccount `name` for the API server's own audiences and the OE's."""
    plain = kube.kubectl("create", "token", name, "--namespace", namespace, "--duration=10m").strip()
    audiences = [*token_audiences(plain), CLIENT_AUDIENCE]
    args = [arg for aud in dict.fromkeys(audiences) for arg in ("--audience", aud)]
    return kube.kubectl("create", "token", name, "--namespace", namespace, *args, "--duration=1h").strip()


def grant_port_forward(kube: Kube, *, system_ns: str, app_ns: str) -> None:
    """What `kubectl port-forward svc/agent-engine-oe` needs in the OE's namespace, for the journey's
    people."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": PORT_FORWARD_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "pods"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["get", "create"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": PORT_FORWARD_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PORT_FORWARD_ROLE},
        "subjects": [
            {"kind": "ServiceAccount", "name": name, "namespace": app_ns} for name in (INVOKER, REVIEWER)
        ],
    }
    document = {"apiVersion": "v1", "kind": "List", "items": [role, binding]}
    kube.kubectl("apply", "--namespace", system_ns, "-f", "-", stdin=json.dumps(document))
    for name in (INVOKER, REVIEWER):
        user = f"system:serviceaccount:{app_ns}:{name}"
        _until_granted(kube, user=user, namespace=system_ns)


def _until_granted(kube: Kube, *, user: str, namespace: str) -> None:
    from tests.install_flow import eventually

    eventually(
        f"{user} may port-forward in {namespace}",
        lambda: kube.kubectl(
            "auth", "can-i", "create", "pods", "--subresource=portforward", f"--as={user}",
            "--namespace", namespace, check=False,
        ).strip() == "yes",
        timeout=60,
        interval=0.2,
    )  # fmt: skip


def people_kubeconfig(kube: Kube, *, app_ns: str, work: Path) -> tuple[Path, str]:
    """The developer's and the reviewer's contexts on the platform's cluster; the KUBECONFIG list that puts
    them first and the platform's own file second, and the platform's context name."""
    platform_file = kube.env["KUBECONFIG"].split(os.pathsep)[0]
    current = json.loads(kube.kubectl("config", "view", "--minify", "-o", "json"))
    cluster = current["contexts"][0]["context"]["cluster"]
    platform_context = current["current-context"]
    reviewer_token = work / "reviewer.token"
    reviewer_token.write_text(person_token(kube, namespace=app_ns, name=REVIEWER))
    reviewer_token.chmod(0o600)
    developer_token = person_token(kube, namespace=app_ns, name=INVOKER)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": DEVELOPER_CONTEXT,
        "contexts": [
            {"name": name, "context": {"cluster": cluster, "user": name, "namespace": app_ns}}
            for name in (DEVELOPER_CONTEXT, REVIEWER_CONTEXT)
        ],
        "users": [
            {"name": DEVELOPER_CONTEXT, "user": {"token": developer_token}},
            {"name": REVIEWER_CONTEXT, "user": exec_user(token_file=reviewer_token)},
        ],
    }
    people = work / "people.kubeconfig"
    people.write_text(yaml.safe_dump(document))
    people.chmod(0o600)
    return Path(f"{people}{os.pathsep}{platform_file}"), platform_context


def scripted_editor(work: Path) -> str:
    """An $EDITOR that checks it was given the held call's arguments and writes the edited ones."""
    script = work / "editor.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        "target = pathlib.Path(sys.argv[-1])\n"
        f"assert json.loads(target.read_text()) == {HELD!r}, target.read_text()\n"
        f"target.write_text({json.dumps(EDITED)!r})\n"
    )
    script.chmod(0o755)
    return str(script)


# The step ------------------------------------------------------------------------------------------------


def cli_through_kubeconfig(
    kube: Kube, *, system_ns: str, app_ns: str, work: Path, earlier_execution: str
) -> dict[str, Any]:
    """Drive `agentengine` through the kubeconfig against the chart's OE pod (see the module's docstring).
    Runs after `invoke_through_oe` (its ServiceAccounts and `earlier_execution`)."""
    grant_port_forward(kube, system_ns=system_ns, app_ns=app_ns)
    kubeconfig, platform_context = people_kubeconfig(kube, app_ns=app_ns, work=work)
    base_env = {"KUBECONFIG": str(kubeconfig), "AGENTENGINE_OE_NAMESPACE": system_ns}
    began = time.monotonic()
    commands = 0

    def agentengine(*argv: str, env: Mapping[str, str] | None = None) -> Command:
        nonlocal commands
        commands += 1
        environ = cli_env(None, token=None, env={**base_env, **(env or {})})
        environ = {k: v for k, v in environ.items() if v}  # an empty value unsets it
        child = pexpect.spawn(
            str(SCRIPT), list(argv), env=environ, encoding="utf-8", timeout=60, dimensions=(50, 240)
        )
        return Command(argv=argv, child=child)

    report: dict[str, Any] = {}
    # Bad input against the cluster, each one line naming the fix.
    everywhere = one_error_line(
        agentengine("get", "executions", env={"AGENTENGINE_OE_NAMESPACE": ""}).finish(code=4)
    )
    assert "AGENTENGINE_OE_NAMESPACE" in everywhere and "--server" in everywhere, everywhere
    not_installed = one_error_line(
        agentengine("get", "executions", env={"AGENTENGINE_OE_NAMESPACE": app_ns}).finish(code=3)
    )
    assert f"no Agent Engine OE in namespace {app_ns}" in not_installed, not_installed
    assert "helm install" in not_installed, not_installed
    no_token = one_error_line(agentengine("--context", platform_context, "get", "executions").finish(code=4))
    assert "kubectl create token" in no_token, no_token
    unknown = one_error_line(agentengine("invoke", "nobody", "--text", "hi").finish(code=3))
    assert "not found" in unknown, unknown
    malformed = one_error_line(agentengine("invoke", EXAMPLE_AGENT, "-i", "{oops").finish(code=2))
    assert "--input is not JSON" in malformed, malformed

    # The journey's earlier execution, listed through the forward.
    listed = agentengine("get", "executions", "-n", app_ns, "--status", "completed").finish()
    assert earlier_execution in listed and f"system:serviceaccount:{app_ns}:{INVOKER}" in listed, listed

    # Follow an invoke to its hold.
    follow = agentengine("invoke", EXAMPLE_AGENT, "--text", "sign it", "--follow")
    execution = follow.expect(r"execution \S+").split()[1]
    follow.expect(r"suspended.*waiting for review")
    shown = follow.finish()
    assert f"agentengine approve {execution}" in shown, shown
    suspended = first_json(agentengine("get", "execution", execution, "-o", "json").finish())
    assert suspended["status"] == "suspended", suspended
    assert suspended["suspension"]["tool"] == "sign_message", suspended["suspension"]

    # A watch of its events holds a forward open until the reviewer's decision ends the execution.
    watch = agentengine("events", execution, "-w")
    watch.expect("waiting for review")
    assert watch.ports, "the watching CLI listened on no loopback port (its port-forward)"
    report["forward_ports_seen"] = sorted(watch.ports)
    approve = agentengine(
        "--context", REVIEWER_CONTEXT, "approve", execution, "--edit", "--notes", "edited by the journey",
        env={"EDITOR": scripted_editor(work)},
    )  # fmt: skip
    approve.finish()
    watch.expect("completed")
    watch.finish()
    view = first_json(agentengine("get", "execution", execution, "-o", "json").finish())
    assert view["status"] == "completed", view
    assert view["result"]["answer"] == ANSWER, view["result"]
    assert view["reviews"][0]["decided_by"]["username"] == f"system:serviceaccount:{app_ns}:{REVIEWER}"
    audit = agentengine("audit", execution).finish()
    assert "sign_message" in audit and "resume" in audit, audit
    records = first_json(agentengine("audit", execution, "-o", "json").finish())["records"]
    resume = next(record for record in records if record["kind"] == "resume")
    assert resume["args"] == {"requested": HELD, "executed": EDITED}, resume

    # Cancel one held execution, reject another.
    def held() -> str:
        started = first_json(
            agentengine("invoke", EXAMPLE_AGENT, "--text", "hold", "--wait", "-o", "json").finish()
        )
        assert started["status"] == "suspended", started
        return str(started["execution_id"])

    cancelled = held()
    assert "cancelled" in agentengine("cancel", cancelled).finish()
    rejected = held()
    agentengine("--context", REVIEWER_CONTEXT, "reject", rejected, "--notes", "not this one").finish()
    rejected_view = first_json(agentengine("get", "execution", rejected, "-o", "json").finish())
    assert rejected_view["reviews"][0]["decision"] == "rejected", rejected_view["reviews"]
    not_suspended = one_error_line(
        agentengine("--context", REVIEWER_CONTEXT, "approve", cancelled).finish(code=1)
    )
    assert "not suspended" in not_suspended, not_suspended

    report.update(
        execution=execution,
        cancelled=cancelled,
        rejected=rejected,
        rejected_status=rejected_view["status"],
        commands=commands,
        seconds=round(time.monotonic() - began, 1),
    )
    return report

"""`make run`: the product's main job on this machine, then the platform keeps serving until Ctrl-C.

python -m agent_runtime.demo [--once] [--repo DIR]   (--once: stop after the demo instead of serving)

The demo's own work (invoke, follow, approve, answer, audit) goes through the CLI's client of the OE. At the
approval a person at a terminal is asked (approve, reject, or edit the arguments); without a terminal it
approves.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from agent_runtime.cli.client import OEClient
from agent_runtime.demo.platform import (
    AGENT,
    APP_NAMESPACE,
    CLIENT,
    DEMO_TEXT,
    LocalPlatform,
    client_token_command,
)

_SETTLED = ("suspended", "completed", "failed", "cancelled")


def _step(event: dict[str, Any]) -> str | None:
    data = event.get("data") or {}
    if event["type"] == "step_started":
        return f"  step {event['step']}: {data.get('tool')} -> {data.get('route')}"
    if event["type"] == "step_finished":
        cached = " (from the replay cache)" if data.get("from_cache") else ""
        error = f" [{data['error_category']}]" if data.get("error_category") else ""
        return f"  step {event['step']}: {data.get('tool')} {data.get('status')}{error}{cached}"
    if event["type"] in ("running", "suspended", "resumed", *_SETTLED):
        return f"  execution {event['type']}"
    return None


def _follow(client: OEClient, execution_id: str, *, after: int = 0) -> int:
    """Print the execution's steps until it ends or suspends; returns the last event's seq."""
    last = after
    for event in client.events(execution_id, after=after):
        last = int(event.get("seq", last))
        if line := _step(event):
            print(line, flush=True)
        if event["type"] in _SETTLED:
            break
    return last


def _decide(held: dict[str, Any]) -> tuple[str, dict[str, Any] | None, str]:
    """(decision, edited args or None, notes): a person at a terminal is asked; otherwise approved."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("Approving it as a reviewer would (no terminal to ask; agentengine approve ID does the same)")
        return "approved", None, "approved by make run"
    import click

    from agent_runtime.cli.editing import edit_held_args

    answer = click.prompt(
        "Approve, reject, or edit the arguments first?",
        type=click.Choice(["approve", "reject", "edit"]),
        default="approve",
    )
    if answer == "reject":
        return "rejected", None, click.prompt("Why (the agent sees this)", default="rejected in make run")
    if answer == "edit":
        return (
            "approved",
            edit_held_args(held.get("args") or {}),
            "approved with edited arguments in make run",
        )
    return "approved", None, "approved in make run"


def demo(*, server: str, token: str, agent: str = f"{APP_NAMESPACE}/{AGENT}") -> int:
    """Invoke the agent, follow it, decide each held call, print the answer and the audit."""
    print(f"\nInvoking {agent}: {DEMO_TEXT!r}")
    with OEClient(server=server, token=token, timeout=60) as client:
        execution_id = str(client.invoke(agent=agent, input={"text": DEMO_TEXT})["execution_id"])
        print(f"  execution {execution_id}")
        last = _follow(client, execution_id)
        view = client.execution(execution_id)
        while view["status"] == "suspended":
            held = view["suspension"]
            call = f"{held.get('tool')}({json.dumps(held.get('args'))})"
            print(f"\nApproval needed: {call} - {held.get('reason')}")
            decision, args, notes = _decide(held)
            client.resume(execution_id, decision=decision, notes=notes, args=args)
            last = _follow(client, execution_id, after=last)
            view = client.execution(execution_id)
        if view["status"] != "completed":
            print(f"\nThe execution ended {view['status']}: {view.get('error')}", file=sys.stderr)
            return 1
        print(f"\nAnswer: {view['result']['answer']}")
        # Who did what, as the OE recorded it from the caller's Kubernetes identity (issue 28).
        print(f"Invoked by: {(view.get('invoked_by') or {}).get('username')}")
        for review in view.get("reviews") or []:
            print(f"Decided by: {(review.get('decided_by') or {}).get('username')}")
        print("\nAudit trail:")
        for record in client.audit(execution_id):
            where = f" via {record['route']}" if record.get("route") else ""
            step = f"step {record['step']}" if record.get("step") is not None else "      "
            print(
                f"  {step:8s} {record['kind']:8s} {record.get('tool') or '':14s} {record['decision']}{where}"
            )
    return 0


def instructions(platform: LocalPlatform) -> None:
    agent = f"{APP_NAMESPACE}/{AGENT}"
    print(
        f"""
The platform keeps serving. The console: {platform.oe_url}/console
  (sign in with the token `{client_token_command()}` prints)

Try, in another terminal:

  export KUBECONFIG={platform.kubeconfig}
  kubectl get agents -n {APP_NAMESPACE}
  # The OE takes the cluster's identities: {CLIENT} is bound to the chart's invoker and reviewer roles.
  export AGENTENGINE_SERVER={platform.oe_url} AGENTENGINE_TOKEN=$({client_token_command()})
  agentengine invoke {agent} --text 'count the words in hello world' --follow
  agentengine get executions -n {APP_NAMESPACE}
  agentengine reviews -n {APP_NAMESPACE}
  agentengine approve EXECUTION_ID

Ctrl-C stops every process and removes {platform.workdir}.""",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make run", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--once", action="store_true", help="stop after the demo")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the checkout (charts/, examples/)")
    args = parser.parse_args(argv)
    if not (args.repo / "charts" / "agent-engine").is_dir():
        print(f"make run: {args.repo} is not the repository's root (no charts/agent-engine); pass --repo DIR")
        return 2

    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    platform = LocalPlatform(repo=args.repo.resolve(), say=lambda line: print(line, flush=True))
    started = time.monotonic()
    try:
        platform.up()
        print(f"      (up in {time.monotonic() - started:.0f} s)")
        code = demo(server=platform.oe_url, token=platform.client_token)
        if code == 0 and not args.once:
            instructions(platform)
            while True:
                time.sleep(3600)
        return code
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
        return 0
    except Exception as exc:
        print(f"\nmake run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        for child in platform.children:
            if not child.alive():
                print(f"--- {child.name} exited; its last output:\n{child.tail(2000)}", file=sys.stderr)
        return 1
    finally:
        platform.down()
        print("stopped: no process and no directory left behind", flush=True)


if __name__ == "__main__":
    sys.exit(main())

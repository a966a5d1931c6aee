"""`make run`: the product's main job on this machine, then the platform keeps serving until Ctrl-C.

python -m tests.local_platform [--once]   (--once: stop after the demo instead of serving)
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from types import FrameType
from typing import Any

from tests.cluster.controlplane import ControlPlaneError
from tests.local_platform.stack import (
    AGENT,
    APP_NAMESPACE,
    CLIENT,
    DEMO_TEXT,
    LocalPlatform,
    client_token_command,
)


def _step(event: dict[str, Any]) -> str | None:
    data = event.get("data") or {}
    if event["type"] == "step_started":
        return f"  step {event['step']}: {data.get('tool')} -> {data.get('route')}"
    if event["type"] == "step_finished":
        cached = " (from the replay cache)" if data.get("from_cache") else ""
        error = f" [{data['error_category']}]" if data.get("error_category") else ""
        return f"  step {event['step']}: {data.get('tool')} {data.get('status')}{error}{cached}"
    if event["type"] in ("running", "suspended", "resumed", "completed", "failed", "cancelled"):
        return f"  execution {event['type']}"
    return None


def demo(platform: LocalPlatform) -> int:
    print(f"\nInvoking {APP_NAMESPACE}/{AGENT}: {DEMO_TEXT!r}")
    with platform.client() as client:
        response = client.post(
            "/invoke", json={"agent": f"{APP_NAMESPACE}/{AGENT}", "input": {"text": DEMO_TEXT}}
        )
        response.raise_for_status()
        execution_id = response.json()["execution_id"]
        print(f"  execution {execution_id}")
        last = 0
        for event in platform.follow(execution_id):
            last = event["seq"]
            if line := _step(event):
                print(line, flush=True)
        view = client.get(f"/execution/{execution_id}").json()
        if view["status"] == "suspended":
            held = view["suspension"]
            print(
                f"\nApproval needed: {held.get('tool')}({json.dumps(held.get('args'))})"
                f" - {held.get('reason')}"
            )
            print('Approving it as a reviewer would (POST .../resume {"decision": "approved"})')
            client.post(
                f"/api/v1/projects/{APP_NAMESPACE}/executions/{execution_id}/resume",
                json={"decision": "approved", "reviewer_notes": "approved by make run"},
            ).raise_for_status()
            for event in platform.follow(execution_id, after=last):
                if line := _step(event):
                    print(line, flush=True)
            view = client.get(f"/execution/{execution_id}").json()
        if view["status"] != "completed":
            print(f"\nThe execution ended {view['status']}: {view.get('error')}", file=sys.stderr)
            return 1
        print(f"\nAnswer: {view['result']['answer']}")
        # Who did what, as the OE recorded it from the caller's Kubernetes identity (issue 28).
        print(f"Invoked by: {(view.get('invoked_by') or {}).get('username')}")
        for review in view.get("reviews") or []:
            print(f"Decided by: {(review.get('decided_by') or {}).get('username')}")
        audit = client.get(f"/execution/{execution_id}/audit").json()["records"]
        print("\nAudit trail:")
        for record in audit:
            where = f" via {record['route']}" if record.get("route") else ""
            step = f"step {record['step']}" if record.get("step") is not None else "      "
            print(
                f"  {step:8s} {record['kind']:8s} {record.get('tool') or '':14s} {record['decision']}{where}"
            )
    return 0


def instructions(platform: LocalPlatform) -> None:
    assert platform.cluster is not None
    auth = '-H "authorization: Bearer $TOKEN"'
    print(
        f"""
The platform keeps serving. Try:

  export KUBECONFIG={platform.cluster.kubeconfig}
  kubectl get agents -n {APP_NAMESPACE}
  # The OE takes the cluster's identities: {CLIENT} is bound to the chart's invoker and reviewer roles.
  TOKEN=$({client_token_command()})
  curl -s {auth} -H 'content-type: application/json' \\
    -d '{{"agent": "{APP_NAMESPACE}/{AGENT}", "input": {{"text": "count the words in hello world"}}}}' \\
    {platform.oe_url}/invoke
  curl -s {auth} '{platform.oe_url}/executions?agent={APP_NAMESPACE}/{AGENT}'
  curl -s {auth} -H 'content-type: application/json' -d '{{"decision": "approved"}}' \\
    {platform.oe_url}/api/v1/projects/{APP_NAMESPACE}/executions/EXECUTION_ID/resume

Ctrl-C stops every process and removes {platform.workdir}.""",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make run", description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="stop after the demo")
    args = parser.parse_args(argv)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    platform = LocalPlatform(say=lambda line: print(line, flush=True))
    started = time.monotonic()
    try:
        platform.up()
        print(f"      (up in {time.monotonic() - started:.0f} s)")
        code = demo(platform)
        if code == 0 and not args.once:
            instructions(platform)
            while True:
                time.sleep(3600)
        return code
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
        return 0
    except ControlPlaneError as exc:
        print(f"\nmake run: the control plane could not start: {exc}", file=sys.stderr)
        return 1
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

"""The chaos tier's "OE store unreachable" fault: the OE on PostgreSQL (oe.store.type=postgres), whose pod is
stopped for a while and started again.

PostgreSQL (tests/chaos/images/postgres, image test/chaos-postgres) runs as a Deployment of the release
namespace, its data in a hostPath directory of the real node so a stopped pod's successor finds it; the OE
reads its URL from a Secret (oe.store.postgres.urlSecret). The fault scales the Deployment to 0, and while no
PostgreSQL runs the OE's clients are answered 503 with Retry-After (never a 500: each status is counted), then
scales it back to 1; every execution then completes or stays held, and held ones are approved.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.install_flow import Kube, eventually, pods, rollout

NAME = "chaos-postgres"
URL_SECRET = "chaos-postgres-url"
UID = 10002  # the image's postgres user
OUTAGE_S = 20.0


def objects(*, image: str, namespace: str, data_dir: Path, password: str) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": NAME}
    url = f"postgresql://postgres:{password}@{NAME}.{namespace}.svc.cluster.local:5432/postgres"
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    password_ref = {"secretKeyRef": {"name": URL_SECRET, "key": "password"}}
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": URL_SECRET},
            "stringData": {"url": url, "password": password},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "strategy": {"type": "Recreate"},  # one server on one data directory
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "initContainers": [
                            {
                                # The kubelet makes the hostPath directory root's; the server runs as UID.
                                "name": "own-data",
                                "image": image,
                                "command": ["chown", f"{UID}:{UID}", "/data"],
                                "securityContext": {"runAsUser": 0, "capabilities": {"add": ["CHOWN"]}},
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "containers": [
                            {
                                "name": "postgres",
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "env": [{"name": "POSTGRES_PASSWORD", "valueFrom": password_ref}],
                                "ports": [{"name": "postgres", "containerPort": 5432}],
                                "readinessProbe": {"tcpSocket": {"port": "postgres"}, "periodSeconds": 2},
                                "securityContext": {"runAsUser": UID, "runAsGroup": UID, **restricted},
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [
                            {"name": "data", "hostPath": {"path": str(data_dir), "type": "DirectoryOrCreate"}}
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME},
            "spec": {"selector": labels, "ports": [{"name": "postgres", "port": 5432}]},
        },
    ]


def new_password() -> str:
    return secrets.token_hex(16)


def helm_values() -> dict[str, str]:
    return {"oe.store.type": "postgres", "oe.store.postgres.urlSecret.name": URL_SECRET}


def stop(kube: Kube, *, namespace: str) -> None:
    kube.kubectl("scale", "deployment", NAME, "--namespace", namespace, "--replicas=0")
    eventually(
        "PostgreSQL's pod gone",
        lambda: (
            not kube.get_json("pods", "--namespace", namespace, "-l", f"app.kubernetes.io/name={NAME}")[
                "items"
            ]
        ),
        timeout=60,
    )


def start(kube: Kube, *, namespace: str) -> None:
    kube.kubectl("scale", "deployment", NAME, "--namespace", namespace, "--replicas=1")
    rollout(kube, namespace=namespace, deployment=NAME)
    selector = f"app.kubernetes.io/name={NAME}"
    eventually("PostgreSQL's pod", lambda: bool(pods(kube, namespace=namespace, selector=selector)))


def probe_while_away(
    client: httpx.Client, *, executions: list[str], invoke_body: dict[str, Any], seconds: float
) -> tuple[Counter[str], list[str]]:
    """The OE's answers while its store is away, as `METHOD status [retry-after]` counts; and the executions
    an /invoke that got through anyway started (none expected: the store holds them)."""
    answers: Counter[str] = Counter()
    started: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for method, path, body in (
            ("GET", f"/execution/{executions[0]}", None),
            ("POST", "/invoke", invoke_body),
        ):
            try:
                response = client.request(method, path, json=body, timeout=15)
            except httpx.HTTPError as error:
                answers[f"{method} {type(error).__name__}"] += 1
                continue
            retry = " retry-after" if response.headers.get("retry-after") else ""
            answers[f"{method} {response.status_code}{retry}"] += 1
            if method == "POST" and response.status_code == 202:
                started.append(response.json()["execution_id"])
        time.sleep(1.0)
    return answers, started

"""The chart's OE store choices (issue 35): `oe.store: sqlite|mongodb|postgres`, several replicas refused by
the values schema on SQLite, PostgreSQL's URL from a Secret, and a budget and anti-affinity for several."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_chart_render import OE, helm, matches, one, pod, refused, render

__all__ = ["helm"]  # the module-scoped fixture, shared

POSTGRES = {"oe__store__type": "postgres", "oe__store__postgres__urlSecret__name": "oe-pg"}


def _env(docs: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in pod(one(docs, "Deployment", OE))["containers"][0]["env"]}


def test_postgres_takes_its_url_from_a_secret_with_pool_and_timeout(helm: Path) -> None:
    docs = render(helm, oe__store__postgres__poolSize="20", **POSTGRES)
    env = _env(docs)
    assert env["OE_STORE_TYPE"]["value"] == "postgres"
    assert env["OE_POSTGRES_URL"]["valueFrom"] == {"secretKeyRef": {"name": "oe-pg", "key": "url"}}
    assert "value" not in env["OE_POSTGRES_URL"]  # never inline: it holds the password
    assert (env["OE_POSTGRES_POOL_SIZE"]["value"], env["OE_POSTGRES_STATEMENT_TIMEOUT_S"]["value"]) == (
        "20",
        "10",
    )
    assert "OE_MONGODB_URI" not in env and "OE_SQLITE_PATH" not in env
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    deployment = one(docs, "Deployment", OE)
    assert "strategy" not in deployment["spec"]  # rolling: replicas share the database
    egress = one(docs, "NetworkPolicy", OE)["spec"]["egress"]
    assert 5432 in {p["port"] for rule in egress for p in rule.get("ports", [])}
    assert 27017 not in {p["port"] for rule in egress for p in rule.get("ports", [])}


def test_postgres_without_its_secret_is_refused_naming_the_value(helm: Path) -> None:
    assert "oe.store.postgres.urlSecret.name" in refused(helm, {"oe.store.type": "postgres"})


@pytest.mark.parametrize("store", [{}, {"oe.store.type": "sqlite"}])
def test_several_replicas_on_sqlite_are_refused_by_the_values_schema(
    helm: Path, store: dict[str, str]
) -> None:
    message = refused(helm, {"oe.replicas": "2", **store})
    assert "/oe/store/type" in message and "postgres" in message


def test_an_unknown_store_type_is_refused(helm: Path) -> None:
    assert "/oe/store/type" in refused(helm, {"oe.store.type": "mysql"})


def test_several_postgres_replicas_get_a_budget_a_spread_and_a_preferred_anti_affinity(helm: Path) -> None:
    docs = render(helm, oe__replicas="3", **POSTGRES)
    deployment = one(docs, "Deployment", OE)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 3
    assert _env(docs)["OE_REPLICAS"]["value"] == "3"
    budget = one(docs, "PodDisruptionBudget", OE)
    assert budget["spec"]["maxUnavailable"] == 1 and matches(budget["spec"]["selector"], pod_labels)
    (term,) = pod(deployment)["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert matches(term["podAffinityTerm"]["labelSelector"], pod_labels)
    # One replica: no budget (it would block every drain) and no anti-affinity.
    single = render(helm, **POSTGRES)
    assert not [d for d in single if d["kind"] == "PodDisruptionBudget" and d["metadata"]["name"] == OE]
    assert "affinity" not in pod(one(single, "Deployment", OE))


def test_an_affinity_value_replaces_the_default_anti_affinity(helm: Path) -> None:
    term = "oe__affinity__nodeAffinity__requiredDuringSchedulingIgnoredDuringExecution__nodeSelectorTerms[0]"
    match = f"{term}__matchExpressions[0]"
    docs = render(
        helm, oe__replicas="2", **{f"{match}__key": "pool", f"{match}__operator": "Exists"}, **POSTGRES
    )
    affinity = pod(one(docs, "Deployment", OE))["affinity"]
    assert set(affinity) == {"nodeAffinity"}

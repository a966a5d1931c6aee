"""The real Stripe document (../shared/specs): compiled whole, then called against a loopback provider."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qsl

import pytest

from agent_runtime.connectors import (
    ConnectorExecutor,
    ToolDefinitions,
    ToolYaml,
    build_bundle,
    compile_catalog,
    materialize_connector,
)
from tests.providers.echo_provider import RunningProvider, running_echo_provider
from tests.unit.connectors.sample_documents import stripe_spec

KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"


@pytest.fixture(scope="module")
def stripe() -> ToolDefinitions:
    return compile_catalog(stripe_spec(), connector_name="stripe")


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    with running_echo_provider() as running:
        yield running


def test_every_operation_is_accounted_for(stripe: ToolDefinitions) -> None:
    assert len(stripe.tools) + len(stripe.skipped) == 468
    assert [(s.operation_id, "multipart/form-data" in s.reason) for s in stripe.skipped] == [
        ("PostFiles", True)
    ]
    names = [t.name for t in stripe.tools]
    assert len(set(names)) == len(names)
    assert all(len(n) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+", n) for n in names)
    assert all(set(t.input_schema) == {"type", "properties", "required"} for t in stripe.tools)
    assert {o.type for o in stripe.auth_options} == {"basic", "bearer"}


def test_compiling_again_gives_the_same_catalog_and_bundle(stripe: ToolDefinitions) -> None:
    again = compile_catalog(stripe_spec(), connector_name="stripe")
    assert again.dumps() == stripe.dumps()
    tool = ToolYaml(name="stripe", source={"base_url": "https://api.stripe.com"}, expose={"allow": ["*"]})
    assert (
        build_bundle([materialize_connector(tool, again)]).digest
        == build_bundle([materialize_connector(tool, stripe)]).digest
    )


def _executor(stripe: ToolDefinitions, provider: RunningProvider) -> ConnectorExecutor:
    tool = ToolYaml(
        name="stripe",
        source={"base_url": f"{provider.url}/echo"},
        expose={"allow": ["PostCustomers", "GetCustomers", "GetCustomersCustomer"]},
        auth={"type": "basic", "env": "STRIPE_SECRET_KEY"},
    )
    return ConnectorExecutor(materialize_connector(tool, stripe))


def test_form_encoded_create_call_matches_stripes_wire_format(
    stripe: ToolDefinitions, provider: RunningProvider
) -> None:
    arguments = {
        "email": "jenny@example.com",
        "metadata": {"order_id": "6735", "note": "a&b=c"},
        "address": {"city": "Berlin", "line1": "Unter den Linden 1"},
        "expand": ["default_source", "tax"],
        "preferred_locales": ["de", "en"],
        "invoice_settings": {"custom_fields": [{"name": "PO", "value": "42"}]},
        "balance": -500,
        "tax_exempt": "none",
        "not_a_stripe_field": "dropped",
    }
    with _executor(stripe, provider) as executor:
        echo = executor.execute("stripe_PostCustomers", arguments, env={"STRIPE_SECRET_KEY": KEY}).body
    assert echo["method"] == "POST" and echo["path"] == "/echo/v1/customers"
    assert echo["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert echo["headers"]["authorization"].startswith("Basic ")
    assert dict(parse_qsl(echo["body"])) == {
        "address[city]": "Berlin",
        "address[line1]": "Unter den Linden 1",
        "balance": "-500",
        "email": "jenny@example.com",
        "expand[0]": "default_source",
        "expand[1]": "tax",
        "invoice_settings[custom_fields][0][name]": "PO",
        "invoice_settings[custom_fields][0][value]": "42",
        "metadata[note]": "a&b=c",
        "metadata[order_id]": "6735",
        "preferred_locales[0]": "de",
        "preferred_locales[1]": "en",
        "tax_exempt": "none",
    }
    assert "metadata%5Bnote%5D=a%26b%3Dc" in echo["body"]


def test_deep_object_query_matches_stripes_wire_format(
    stripe: ToolDefinitions, provider: RunningProvider
) -> None:
    arguments = {
        "created": {"gte": 1690000000, "lt": 1700000000},
        "expand": ["data.default_source"],
        "limit": 3,
    }
    with _executor(stripe, provider) as executor:
        echo = executor.execute("stripe_GetCustomers", arguments, env={"STRIPE_SECRET_KEY": KEY}).body
        single = executor.execute(
            "stripe_GetCustomersCustomer", {"customer": "cus_9s6XKzkNRiz8i3"}, env={"STRIPE_SECRET_KEY": KEY}
        ).body
    assert echo["method"] == "GET" and echo["body"] == ""
    assert echo["query_pairs"] == [
        ["created[gte]", "1690000000"],
        ["created[lt]", "1700000000"],
        ["expand[0]", "data.default_source"],
        ["limit", "3"],
    ]
    assert single["path"] == "/echo/v1/customers/cus_9s6XKzkNRiz8i3"

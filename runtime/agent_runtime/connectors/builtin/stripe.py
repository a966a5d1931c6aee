"""`stripe`: the workspace's own Stripe account (`stripe.get_customer`, `stripe.list_charges`,
`stripe.create_refund`), separate from any platform billing. Stripe takes form-encoded bodies and answers
errors as `{"error": {"type", "code", "message", "param"}}`. Writes are never retried by the connector; each
refund request carries an Idempotency-Key of its own."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from agent_runtime.connectors.builtin._rest import (
    RestClient,
    base_url_schema,
    bearer,
    clean_segment,
    host_port,
    json_of,
)
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, TestResult, tool

_ID = {"type": "string", "minLength": 3, "maxLength": 255, "pattern": r"^[A-Za-z0-9_]+$"}


class StripeConnector(BuiltinConnector):
    type = "stripe"
    description = "The workspace's own Stripe account: read customers and charges, create refunds."
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base_url": base_url_schema("https://api.stripe.com/v1", "API root"),
            "stripe_version": {"type": "string", "maxLength": 64},
        },
    }
    secrets = {"api_key": "a secret or restricted key (sk_... / rk_...)"}
    required_secrets = frozenset({"api_key"})
    tools = (
        tool(
            "stripe.get_customer",
            "Read one customer by id (cus_...): name, email, balance, currency, delinquent.",
            properties={"customer_id": _ID},
            required=["customer_id"],
            sensitive=False,
        ),
        tool(
            "stripe.list_charges",
            "List charges, newest first, optionally for one customer; follow starting_after for more.",
            properties={
                "customer_id": _ID,
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "starting_after": _ID,
            },
            sensitive=False,
        ),
        tool(
            "stripe.create_refund",
            "Refund a charge (ch_...) or payment intent (pi_...), fully or `amount` in the smallest currency "
            "unit. Needs approval.",
            properties={
                "charge": _ID,
                "payment_intent": _ID,
                "amount": {"type": "integer", "minimum": 1},
                "reason": {"type": "string", "enum": ["duplicate", "fraudulent", "requested_by_customer"]},
            },
            sensitive=True,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._rest = RestClient(provider="Stripe")

    async def _api(self, method: str, path: str, env: Mapping[str, str], *, read: bool, **kwargs: Any) -> Any:
        key = self.secret("api_key", env)
        headers = bearer(key)
        if self.config.get("stripe_version"):
            headers["Stripe-Version"] = self.config["stripe_version"]
        headers.update(kwargs.pop("headers", {}))
        response = await self._rest.request(
            method,
            f"{self.config['base_url'].rstrip('/')}{path}",
            headers=headers,
            read=read,
            secrets=[key or ""],
            **kwargs,
        )
        return json_of(response, "Stripe")

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        if tool == "stripe.get_customer":
            customer = clean_segment(arguments["customer_id"], "customer_id")
            data = await self._api("GET", f"/customers/{customer}", env, read=True)
            keys = ("id", "name", "email", "balance", "currency", "delinquent", "created", "deleted")
            return {k: data.get(k) for k in keys if k in data}
        if tool == "stripe.list_charges":
            params: dict[str, Any] = {"limit": arguments["limit"]}
            if arguments.get("customer_id"):
                params["customer"] = arguments["customer_id"]
            if arguments.get("starting_after"):
                params["starting_after"] = arguments["starting_after"]
            data = await self._api("GET", "/charges", env, read=True, params=params)
            keys = (
                "id",
                "amount",
                "amount_refunded",
                "currency",
                "status",
                "paid",
                "refunded",
                "created",
                "description",
                "customer",
            )
            return {
                "charges": [
                    {k: c.get(k) for k in keys} for c in data.get("data") or [] if isinstance(c, dict)
                ],
                "has_more": bool(data.get("has_more")),
            }
        if bool(arguments.get("charge")) == bool(arguments.get("payment_intent")):
            raise BuiltinToolError("invalid_arguments", "give exactly one of charge or payment_intent")
        form = {k: arguments[k] for k in ("charge", "payment_intent", "amount", "reason") if k in arguments}
        data = await self._api(
            "POST", "/refunds", env, read=False, data=form, headers={"Idempotency-Key": str(uuid.uuid4())}
        )
        keys = ("id", "amount", "currency", "status", "charge", "payment_intent", "reason")
        return {k: data.get(k) for k in keys}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            await self._api("GET", "/balance", env or self._env, read=True)
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail="the key reads the account's balance")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config.get("base_url") or "https://api.stripe.com/v1")]

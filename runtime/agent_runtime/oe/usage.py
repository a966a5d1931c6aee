"""Token usage and its cost: pure functions over the provider's counts and a price table.

A model step's usage comes from the message the Tool Pod returns (`usage_metadata`, LangChain's shape:
`input_tokens`, `output_tokens`, `input_token_details.cache_read`). As with every provider that reports them,
cached tokens are a part of the input tokens: they are billed at the cached price instead of the input price.

A `PriceTable` maps a model name to its prices in currency units per million tokens (the chart's
`pricing.models`, overridable per Agent); a model missing from the table costs nothing known (`None`), never
zero, so a dashboard cannot take an unpriced model for a free one. The entry `"*"` prices every model the
table does not name.

The policy limits (maxTokens, maxCost) import `Usage`, `PriceTable` and `cost` from here: keep them stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

PER_TOKENS = 1_000_000
DEFAULT_MODEL = "*"


class Usage(BaseModel):
    """Tokens of one model step, or the sum over an execution's steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    # Of the input tokens, those the provider served from its prompt cache.
    cached_tokens: int = Field(default=0, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class ModelPrice(BaseModel):
    """One model's prices per million tokens; cached input defaults to the input price."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached: float | None = Field(default=None, ge=0)


class PriceTable(BaseModel):
    """Model name -> prices (per million tokens), and the currency they are in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = "USD"
    models: dict[str, ModelPrice] = Field(default_factory=dict)

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a currency, such as USD")
        return value

    def price_of(self, model: str | None) -> ModelPrice | None:
        if model and model in self.models:
            return self.models[model]
        return self.models.get(DEFAULT_MODEL)

    def overridden_by(self, other: PriceTable | None) -> PriceTable:
        """This table with `other`'s entries (an Agent's own prices) taking precedence."""
        if other is None:
            return self
        return PriceTable(currency=other.currency, models={**self.models, **other.models})


PRICES_ENV = "OE_PRICES"


def prices_from_env(env: Mapping[str, str]) -> PriceTable:
    """The OE's price table from `OE_PRICES` (JSON: `{"currency": "USD", "models": {name: {input, output,
    cached}}}`, the chart's `pricing` value); an empty table when unset. A bad one names the field."""
    raw = env.get(PRICES_ENV, "").strip()
    if not raw:
        return PriceTable()
    try:
        return PriceTable.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(document)"
        raise ValueError(
            f"{PRICES_ENV}: {where}: {first['msg']}; set the chart's pricing as "
            '{"currency": "USD", "models": {"<model>": {"input": 2.5, "output": 10, "cached": 1.25}}} '
            "(per million tokens)"
        ) from None


def cost(usage: Usage, model: str | None, prices: PriceTable) -> float | None:
    """What `usage` of `model` costs under `prices` (in `prices.currency`); None for an unpriced model."""
    price = prices.price_of(model)
    if price is None:
        return None
    cached = min(usage.cached_tokens, usage.input_tokens)
    cached_price = price.input if price.cached is None else price.cached
    fresh = usage.input_tokens - cached
    return (fresh * price.input + cached * cached_price + usage.output_tokens * price.output) / PER_TOKENS


def usage_of(metadata: Mapping[str, Any] | None) -> Usage | None:
    """The usage a model message reports (`usage_metadata`), or None when it reports none or a bad shape."""
    if not isinstance(metadata, Mapping):
        return None
    counts = [_count(metadata.get(key)) for key in ("input_tokens", "output_tokens")]
    if counts[0] is None and counts[1] is None:
        return None
    details = metadata.get("input_token_details")
    cached = _count(details.get("cache_read")) if isinstance(details, Mapping) else None
    return Usage(input_tokens=counts[0] or 0, output_tokens=counts[1] or 0, cached_tokens=cached or 0)


def model_usage(message: Any) -> tuple[Usage, str | None] | None:
    """A model step's usage and the model that answered (`response_metadata.model_name`), from its message."""
    if not isinstance(message, Mapping):
        return None
    usage = usage_of(message.get("usage_metadata"))
    if usage is None:
        return None
    metadata = message.get("response_metadata")
    model = metadata.get("model_name") if isinstance(metadata, Mapping) else None
    return usage, model if isinstance(model, str) and model else None


def total(usages: Iterable[Usage | None]) -> Usage:
    """The sum of the steps' usage (steps without usage count nothing)."""
    out = Usage()
    for usage in usages:
        if usage is not None:
            out = out + usage
    return out


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value

"""A stand-in provider API for the example Connector: echoes requests, checks the bearer token.

Run it with `python -m echo_agent.provider --port 8080`; it speaks the example catalog's OpenAPI document.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Request

CREDENTIAL_ENV_NAME = "ECHO_PROVIDER_TOKEN"
DEFAULT_TOKEN = "example-provider-token"  # noqa: S105 - the example Secret's value, not a real credential

app = FastAPI(title="Echo provider")
# How many times each message text was stored: a side-effect ledger a test can read (GET /messages/counts).
_stored: Counter[str] = Counter()


def _check(authorization: str | None) -> None:
    expected = os.environ.get(CREDENTIAL_ENV_NAME, DEFAULT_TOKEN)
    if authorization != f"Bearer {expected}":
        raise HTTPException(status_code=401, detail="missing or wrong bearer token")


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/echo/{word}")
def get_echo(word: str, request: Request, authorization: str | None = Header(default=None)) -> dict[str, Any]:
    _check(authorization)
    return {"word": word, "query": dict(request.query_params)}


@app.post("/messages", status_code=201)
async def create_message(
    request: Request, authorization: str | None = Header(default=None)
) -> dict[str, Any]:
    _check(authorization)
    body = await request.json()
    _stored[str(body.get("text")) if isinstance(body, dict) else ""] += 1
    return {"stored": body}


@app.get("/messages/counts")
def message_counts(authorization: str | None = Header(default=None)) -> dict[str, int]:
    _check(authorization)
    return dict(_stored)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a pod listens on every interface
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

"""A stand-in provider API for the example's `notes` Connector: stores notes, checks the bearer token.

Run it with `python -m langgraph_agent.provider --port 8080`; it speaks connectors/notes/openapi.yaml.
Notes live in memory, so `GET /notes` shows exactly what reached the provider (a test counts them).
"""

from __future__ import annotations

import argparse
import os
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel, Field

CREDENTIAL_ENV_NAME = "NOTES_PROVIDER_TOKEN"
DEFAULT_TOKEN = "example-notes-token"  # noqa: S105 - the example Secret's value, not a real credential

app = FastAPI(title="Notes provider")
_notes: list[dict[str, Any]] = []
_lock = threading.Lock()


class NewNote(BaseModel):
    text: str = Field(max_length=2000)


def _check(authorization: str | None) -> None:
    expected = os.environ.get(CREDENTIAL_ENV_NAME, DEFAULT_TOKEN)
    if authorization != f"Bearer {expected}":
        raise HTTPException(status_code=401, detail="missing or wrong bearer token")


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/notes")
def list_notes(authorization: str | None = Header(default=None)) -> dict[str, Any]:
    _check(authorization)
    with _lock:
        return {"notes": list(_notes)}


@app.post("/notes", status_code=201)
def create_note(note: NewNote, authorization: str | None = Header(default=None)) -> dict[str, Any]:
    _check(authorization)
    with _lock:
        stored = {"id": len(_notes) + 1, "text": note.text}
        _notes.append(stored)
    return stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a pod listens on every interface
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

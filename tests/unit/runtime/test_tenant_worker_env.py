"""What a tenant tool worker starts with (issue 36): the platform's variables and the operator's listed
plain ones, never a secret, never a platform variable that names a credential."""

from __future__ import annotations

import pytest

from agent_runtime.servers.tenant_frames import MAX_FRAME_BYTES, encode_frame
from agent_runtime.servers.tenant_workers import worker_base_env

pytestmark = pytest.mark.unit


def test_worker_env_holds_no_secret() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/app",
        "PYTHONPATH": "/app",
        "AGENT_ENTRYPOINT": "pkg.mod:app",
        "AGENTIC_MEMORY_URL": "http://memory:8081",
        "RUNTIME_TOKEN_FILE": "/etc/agent-engine/token",  # a path the worker can read anyway (memory)
        "RUNTIME_TOKEN": "the-token-itself",  # a credential's value never does
        "AGENTIC_LLM_API_KEY": "sk-live-llm",
        "OPENAI_API_KEY": "sk-live-llm",
        "STRIPE_KEY": "sk_live_connector",
        "HTTP_TIMEOUT": "20",
        "REGION": "eu",
        "AGENTIC_TOOL_PLAIN_ENV": "HTTP_TIMEOUT,REGION,SERVICE_TOKEN",
        "SERVICE_TOKEN": "listed-but-named-like-a-credential",
    }
    assert worker_base_env(environ) == {
        "PATH": "/usr/bin",
        "HOME": "/home/app",
        "PYTHONPATH": "/app",
        "AGENT_ENTRYPOINT": "pkg.mod:app",
        "AGENTIC_MEMORY_URL": "http://memory:8081",
        "RUNTIME_TOKEN_FILE": "/etc/agent-engine/token",
        "HTTP_TIMEOUT": "20",
        "REGION": "eu",
        "AGENTIC_TOOL_PLAIN_ENV": "HTTP_TIMEOUT,REGION,SERVICE_TOKEN",
    }


def test_frames_are_length_prefixed_json() -> None:
    frame = encode_frame({"type": "call", "id": 1, "arguments": {"text": "é\n"}})
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert b"\n" not in frame[4:]  # JSON escapes it: one frame never spans a line reader's guess
    assert MAX_FRAME_BYTES >= 16 * 1024 * 1024

"""A loopback OIDC issuer the test control plane's API server trusts (issue 28): no outside identity provider.

A small real HTTPS server (its certificate from the cluster CA) serves the discovery document and the JWKS
of one RSA key; `mint()` signs ID tokens with it. The API server's structured authentication config
(`authentication_config()`, passed as `--authentication-config`) names this issuer, the audience
`agent-engine`, and maps `sub` to the username and `groups` to groups, both prefixed `oidc:`.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.cluster import pki

AUDIENCE = "agent-engine"
PREFIX = "oidc:"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _uint(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class OIDCIssuer:
    """`start()` serves on 127.0.0.1:`port` until `stop()`; `url` is the issuer (the tokens' `iss`)."""

    def __init__(self, *, ca: pki.KeyPair, port: int) -> None:
        self.port = port
        self.url = f"https://127.0.0.1:{port}"
        self.ca_pem = ca.cert_pem
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._kid = uuid.uuid4().hex[:12]
        self._serving = pki.issue(ca, common_name="oidc-issuer", hosts=("127.0.0.1",), server=True)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests = 0

    def documents(self) -> dict[str, dict[str, Any]]:
        public = self._key.public_key().public_numbers()
        jwk = {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self._kid,
            "n": _uint(public.n),
            "e": _uint(public.e),
        }
        return {
            "/.well-known/openid-configuration": {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/jwks",
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            },
            "/jwks": {"keys": [jwk]},
        }

    def mint(
        self, subject: str, *, groups: tuple[str, ...] = (), audience: str = AUDIENCE, ttl_s: int = 600
    ) -> str:
        """An RS256 ID token for `subject`, signed by this issuer."""
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self._kid}
        claims = {
            "iss": self.url,
            "sub": subject,
            "aud": audience,
            "groups": list(groups),
            "iat": now,
            "nbf": now - 5,
            "exp": now + ttl_s,
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def authentication_config(self) -> str:
        """The API server's AuthenticationConfiguration trusting this issuer (JSON is YAML)."""
        return json.dumps(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AuthenticationConfiguration",
                "jwt": [
                    {
                        "issuer": {
                            "url": self.url,
                            "audiences": [AUDIENCE],
                            "certificateAuthority": self.ca_pem.decode("ascii"),
                        },
                        "claimMappings": {
                            "username": {"claim": "sub", "prefix": PREFIX},
                            "groups": {"claim": "groups", "prefix": PREFIX},
                        },
                    }
                ],
            }
        )

    def start(self) -> OIDCIssuer:
        documents = {path: json.dumps(doc).encode() for path, doc in self.documents().items()}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests += 1
                body = documents.get(self.path.split("?", 1)[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("content-type", "application/json")
                payload = body if body is not None else b'{"error": "not_found"}'
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = pki.write_pair(self._serving, Path(tmp), "oidc")
            context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="oidc-issuer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

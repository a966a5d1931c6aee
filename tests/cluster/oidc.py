"""A loopback OIDC issuer the test control plane's API server trusts (issue 28): no outside identity provider.

A small real HTTPS server (its certificate from the cluster CA) serves the discovery document and the JWKS
of one RSA key; `mint()` signs ID tokens with it. The API server's structured authentication config
(`authentication_config()`, passed as `--authentication-config`) names this issuer, the audience
`agent-engine`, and maps `sub` to the username and `groups` to groups, both prefixed `oidc:`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

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
        # Who signs in at /authorize (the test sets it; no login form), and the codes it handed out.
        self.login_as: tuple[str, tuple[str, ...]] | None = None
        self.codes: dict[str, dict[str, Any]] = {}
        self.refused: list[str] = []  # why /token refused a redemption

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
                # The console's sign-in (issue 30): the authorization code flow with PKCE (S256).
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "code_challenge_methods_supported": ["S256"],
                "response_types_supported": ["id_token", "code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            },
            "/jwks": {"keys": [jwk]},
        }

    def mint(
        self,
        subject: str,
        *,
        groups: tuple[str, ...] = (),
        audience: str = AUDIENCE,
        ttl_s: int = 600,
        nonce: str | None = None,
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
        if nonce is not None:
            claims["nonce"] = nonce
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
            def _json(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                issuer.requests += 1
                if self.path != "/token":
                    self._json(404, {"error": "not_found"})
                    return
                form = {
                    k: v[0]
                    for k, v in parse_qs(
                        self.rfile.read(int(self.headers["content-length"] or 0)).decode()
                    ).items()
                }
                grant = issuer.codes.pop(form.get("code", ""), None)
                problem = None
                if grant is None:
                    problem = "unknown or used code"
                elif (
                    form.get("redirect_uri") != grant["redirect_uri"]
                    or form.get("client_id") != grant["client_id"]
                ):
                    problem = "redirect_uri or client_id differs from the authorization request"
                elif (
                    _b64(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
                    != grant["challenge"]
                ):
                    problem = "code_verifier does not match the code_challenge (PKCE)"
                if problem is not None or grant is None:
                    issuer.refused.append(problem or "")
                    self._json(400, {"error": "invalid_grant", "error_description": problem})
                    return
                token = issuer.mint(grant["subject"], groups=grant["groups"], nonce=grant["nonce"])
                self._json(200, {"id_token": token, "token_type": "Bearer", "expires_in": 600})

            def do_GET(self) -> None:
                issuer.requests += 1
                if self.path.startswith("/authorize?"):
                    query = {k: v[0] for k, v in parse_qs(self.path.split("?", 1)[1]).items()}
                    if (
                        issuer.login_as is None
                        or query.get("response_type") != "code"
                        or query.get("code_challenge_method") != "S256"
                        or not query.get("code_challenge")
                    ):
                        self._json(400, {"error": "invalid_request"})
                        return
                    code = uuid.uuid4().hex
                    subject, groups = issuer.login_as
                    issuer.codes[code] = {
                        "challenge": query["code_challenge"],
                        "nonce": query.get("nonce"),
                        "redirect_uri": query.get("redirect_uri", ""),
                        "client_id": query.get("client_id", ""),
                        "subject": subject,
                        "groups": groups,
                    }
                    answer = urlencode({"code": code, "state": query.get("state", "")})
                    target = f"{query.get('redirect_uri', '')}?{answer}"
                    self.send_response(303)
                    self.send_header("location", target)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
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

"""The execution's identity, signed by the OE: issue and verify a short-lived statement (Ed25519).

The OE alone holds the private key; the AER, the Tool Pod and the Memory server hold only the public key,
so none of them can make a statement another one would accept. A statement says who a call is for
(`execution_id`, `agent`, `workspace`, `user_id`, `org_id`), who may accept it (`aud`: aer, tool or memory)
and until when (`exp`). Compact form, one HTTP header value:

    aes1.<kid>.<base64url(canonical JSON claims)>.<base64url(signature over "aes1.<kid>.<claims>")>

`kid` is the first 8 bytes (hex) of SHA-256 over the raw public key, so a verifier picks the key at once.

Both keys follow their mounted files (`RotatingToken`): a verifier accepts the previous public key for the
grace period after it changed, and an unknown `kid` makes it read its file again first; the OE signs with
its current key and, refused with 401, again with the previous one while in grace. Nothing here logs or
raises with a statement, a key or a signature: messages name the reason and the setting only.

Signing and verifying are cached (the OE reuses a statement until half its life is gone; a verifier keeps
what it verified until it expires), so the per-step cost is a dictionary look-up, not a signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_runtime import contract
from agent_runtime.token_file import DEFAULT_GRACE_S, RotatingToken, TokenSettingError, grace_from_env

PREFIX = "aes1"
Audience = Literal["aer", "tool", "memory"]
# execution: one execution's calls; control: an Agent's runtime, no execution (GET /tools, drains);
# export: a Memory read outside an execution, for one user the OE authorized (a data export, a platform job).
# knowledge: the OE's own call to an Agent's knowledge base (the client API's documents), no user at all.
Purpose = Literal["execution", "control", "export", "knowledge"]

# Env names and mount paths (agent_runtime.contract: the operator renders them without this module).
SIGNING_KEY_FILE_ENV = contract.OE_SIGNING_KEY_FILE_ENV
PUBLIC_KEY_FILE_ENV = contract.OE_PUBLIC_KEY_FILE_ENV
KEY_GRACE_ENV = contract.OE_KEY_GRACE_ENV

# A call to a runtime is answered in seconds: 60 s bounds a captured statement's use. A run's memory
# statement lives as long as a turn may (the AER has no way back to the OE for a fresh one mid-turn).
CALL_TTL_S = 60.0
MEMORY_TTL_S = 3600.0
# An export statement (a client's read of one user's memory outside an execution): long enough to page
# through a user's records, short enough that a leaked one is soon worthless.
EXPORT_TTL_S = 900.0
# Statements valid longer than this are refused whatever they say (a clock or a key misused).
MAX_TTL_S = 24 * 3600.0
# Statements kept signed (the OE) or verified (a runtime): a few per execution live at once; expired ones go
# first, and the oldest beyond the limit (a soak at 24 executions/s grew a runtime ~1.4 KB a call while the
# limit was 50,000 and nothing expired: issue 41).
_CACHE_LIMIT = 4096


K = TypeVar("K")
V = TypeVar("V")


class _ExpiringCache(Generic[K, V]):
    """Insertion-ordered entries with an expiry: at each put, expired ones at the front and the oldest
    beyond `limit` are dropped, so the size follows the statements alive, never the calls made."""

    def __init__(self, limit: int = _CACHE_LIMIT) -> None:
        self._limit = limit
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, *, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._entries[key]
            return None
        return entry[0]

    def put(self, key: K, value: V, *, expires: float, now: float) -> None:
        entries = self._entries
        entries.pop(key, None)
        while entries and (len(entries) >= self._limit or next(iter(entries.values()))[1] <= now):
            entries.popitem(last=False)
        entries[key] = (value, expires)

    def discard(self, key: K) -> None:
        self._entries.pop(key, None)


class StatementError(ValueError):
    """A statement was refused. `reason` is a short code (missing, malformed, unknown_key, bad_signature,
    expired, wrong_audience, wrong_workspace, wrong_execution); `status` 401 (send another credential)
    or 403 (a valid statement that does not open this door)."""

    def __init__(self, reason: str, detail: str, *, status: int = 401) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.status = status


class Claims(BaseModel):
    """What a statement says. Empty `execution_id` only for `purpose: control`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    aud: Audience
    agent: str = Field(min_length=1, max_length=320)
    workspace: str = Field(min_length=1, max_length=320)
    execution_id: str = Field(default="", max_length=256)
    user_id: str = Field(default="", max_length=256)
    org_id: str = Field(default="", max_length=256)
    purpose: Purpose = "execution"
    iat: float
    exp: float


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def generate_private_key_pem() -> str:
    """A new OE signing key, PEM (PKCS#8, unencrypted: the Secret it lives in is the protection)."""
    key = Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


def public_key_pem(private_pem: str) -> str:
    """The public half of a signing key, PEM (what runtimes are given)."""
    key = _load_private(private_pem)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )


def _load_private(pem: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
    except (ValueError, TypeError, UnicodeEncodeError):
        raise TokenSettingError("the OE signing key is not a PEM private key; write an Ed25519 key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise TokenSettingError(
            "the OE signing key is not an Ed25519 key; generate one (openssl genpkey -algorithm ed25519)"
        )
    return key


def _load_public(pem: str) -> Ed25519PublicKey:
    # A certificate is taken for the key it carries: Helm can make a key pair but prints the public half
    # only inside a self-signed certificate (the chart's ConfigMap); its dates and signature mean nothing.
    try:
        if "BEGIN CERTIFICATE" in pem:
            key = x509.load_pem_x509_certificate(pem.encode("ascii")).public_key()
        else:
            key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, TypeError, UnicodeEncodeError):
        raise TokenSettingError(
            "the OE public key is not a PEM public key or certificate; copy the OE's public key"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise TokenSettingError("the OE public key is not an Ed25519 key; copy the OE's public key")
    return key


def normalize_public_key_pem(pem: str) -> str:
    """The OE public key as SubjectPublicKeyInfo PEM, from that PEM or a certificate carrying the key (pure).

    The operator names its ConfigMap by this text's digest, so a certificate re-made around the same key
    (every `helm upgrade`) renders the same ConfigMap and rolls no pod."""
    return (
        _load_public(pem)
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )


def sign(claims: Claims, key: Ed25519PrivateKey, *, kid: str) -> str:
    """The compact statement for `claims` (pure)."""
    payload = json.dumps(claims.model_dump(), separators=(",", ":"), sort_keys=True).encode("utf-8")
    head = f"{PREFIX}.{kid}.{_b64(payload)}"
    return f"{head}.{_b64(key.sign(head.encode('ascii')))}"


def expires_at(statement: str) -> float:
    """The `exp` of a statement this process signed itself (pure; nothing is verified: never use it on a
    statement someone else presented)."""
    return float(json.loads(_unb64(statement.split(".")[2]))["exp"])


def looks_like_statement(credential: bytes | str) -> bool:
    prefix = PREFIX + "."
    if isinstance(credential, bytes):
        return credential.startswith(prefix.encode("ascii"))
    return credential.startswith(prefix)


def parse_verified(statement: str, keys: Mapping[str, Ed25519PublicKey], *, now: float) -> Claims:
    """The claims of a statement signed by one of `keys` (by kid) and not expired (pure)."""
    parts = statement.split(".")
    if len(parts) != 4 or parts[0] != PREFIX:
        raise StatementError("malformed", "the credential is not an OE statement")
    _, kid, payload_b64, sig_b64 = parts
    key = keys.get(kid)
    if key is None:
        raise StatementError("unknown_key", "the statement is signed by a key this runtime does not know")
    try:
        signature = _unb64(sig_b64)
        payload = _unb64(payload_b64)
    except (binascii.Error, ValueError):
        raise StatementError("malformed", "the statement is not base64url") from None
    try:
        key.verify(signature, f"{PREFIX}.{kid}.{payload_b64}".encode("ascii"))
    except (InvalidSignature, UnicodeEncodeError):
        raise StatementError("bad_signature", "the statement's signature does not verify") from None
    try:
        claims = Claims.model_validate_json(payload)
    except ValidationError:
        raise StatementError("malformed", "the statement's claims are malformed") from None
    if not claims.exp > now:
        raise StatementError("expired", "the statement has expired")
    if claims.exp - claims.iat > MAX_TTL_S:
        raise StatementError("malformed", "the statement claims a lifetime longer than allowed")
    return claims


def check_claims(
    claims: Claims, *, audience: Audience, workspace: str | None, purposes: frozenset[str] | None = None
) -> None:
    """Refuse (403) a verified statement meant for another component or another Agent (pure)."""
    if claims.aud != audience:
        raise StatementError(
            "wrong_audience", f"the statement is for the {claims.aud}, not the {audience}", status=403
        )
    if workspace and claims.workspace != workspace:
        raise StatementError("wrong_workspace", "the statement is for another Agent's workspace", status=403)
    if purposes is not None and claims.purpose not in purposes:
        raise StatementError(
            "wrong_purpose", f"a {claims.purpose} statement does not open this route", status=403
        )


@dataclass(frozen=True)
class _Key:
    pem: str
    kid: str
    private: Ed25519PrivateKey | None = None
    public: Ed25519PublicKey | None = None


class StatementSigner:
    """The OE's side: statements from its current key (and its previous one while in grace), cached."""

    def __init__(
        self, key: RotatingToken, *, clock: Callable[[], float] = time.time, call_ttl_s: float = CALL_TTL_S
    ) -> None:
        self._key = key
        self._clock = clock
        self._call_ttl_s = call_ttl_s
        self._parsed: dict[str, _Key] = {}
        self._cache: _ExpiringCache[tuple[object, ...], str] = _ExpiringCache()
        self._parse(key.current())  # a bad key fails at start-up, not on the first call

    def __repr__(self) -> str:
        return f"StatementSigner({self._key!r})"

    def _parse(self, pem: str) -> _Key:
        found = self._parsed.get(pem)
        if found is None:
            private = _load_private(pem)
            found = _Key(pem=pem, kid=key_id(private.public_key()), private=private)
            self._parsed = {pem: found, **dict(list(self._parsed.items())[:3])}
        return found

    def public_key_pem(self) -> str:
        return public_key_pem(self._key.current())

    def sign_bytes(self, data: bytes) -> tuple[str, bytes]:
        """(key id, Ed25519 signature of `data`) with the current key: the audit chain's heads (issue 34)."""
        key = self._parse(self._key.current())
        assert key.private is not None
        return key.kid, key.private.sign(data)

    def public_key_pems(self) -> tuple[str, ...]:
        """The public keys of every key accepted now (the current one, the previous one in grace)."""
        return tuple(public_key_pem(pem) for pem in self._key.accepted())

    def issue(
        self,
        *,
        audience: Audience,
        agent: str,
        workspace: str,
        execution_id: str = "",
        user_id: str | None = None,
        org_id: str | None = None,
        purpose: Purpose = "execution",
        ttl_s: float | None = None,
        previous_key: bool = False,
    ) -> str | None:
        """A statement for these claims (None: `previous_key` asked and there is none in grace)."""
        keys = self._key.accepted()
        if previous_key and len(keys) < 2:
            return None
        key = self._parse(keys[1] if previous_key else keys[0])
        ttl = self._call_ttl_s if ttl_s is None else ttl_s
        now = self._clock()
        cache_key = (key.kid, audience, agent, workspace, execution_id, user_id, org_id, purpose, ttl)
        # Reused while more than half its life is left: the receiver never gets one about to expire.
        hit = self._cache.get(cache_key, now=now)
        if hit is not None:
            return hit
        claims = Claims(
            aud=audience,
            agent=agent,
            workspace=workspace,
            execution_id=execution_id,
            user_id=user_id or "",
            org_id=org_id or "",
            purpose=purpose,
            iat=now,
            exp=now + ttl,
        )
        assert key.private is not None
        statement = sign(claims, key.private, kid=key.kid)
        self._cache.put(cache_key, statement, expires=now + ttl / 2, now=now)
        return statement


class StatementVerifier:
    """A runtime's side: statements signed by the OE's current public key (or the previous one in grace)."""

    def __init__(self, key: RotatingToken, *, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._clock = clock
        self._parsed: dict[str, _Key] = {}
        self._cache: _ExpiringCache[str, tuple[Claims, str]] = _ExpiringCache()
        self._keys()  # a bad key fails at start-up

    def __repr__(self) -> str:
        return f"StatementVerifier({self._key!r})"

    def _parse(self, pem: str) -> _Key:
        found = self._parsed.get(pem)
        if found is None:
            public = _load_public(pem)
            found = _Key(pem=pem, kid=key_id(public), public=public)
            self._parsed = {pem: found, **dict(list(self._parsed.items())[:3])}
        return found

    def _keys(self, pems: tuple[str, ...] | None = None) -> dict[str, Ed25519PublicKey]:
        out: dict[str, Ed25519PublicKey] = {}
        for pem in self._key.accepted() if pems is None else pems:
            try:
                key = self._parse(pem)
            except TokenSettingError:
                continue  # a half-written file during a change: the other key stays in service
            assert key.public is not None
            out[key.kid] = key.public
        return out

    def verify(
        self,
        statement: str,
        *,
        audience: Audience,
        workspace: str | None,
        purposes: frozenset[str] | None = None,
    ) -> Claims:
        """The statement's claims, or StatementError saying why it is refused."""
        now = self._clock()
        hit = self._cache.get(statement, now=now)
        if hit is not None:
            claims, kid = hit
            if kid in self._keys():
                check_claims(claims, audience=audience, workspace=workspace, purposes=purposes)
                return claims
            self._cache.discard(statement)
        keys = self._keys()
        kid = statement.split(".", 2)[1] if statement.count(".") == 3 else ""
        if kid and kid not in keys:
            keys = self._keys(self._key.alternatives(""))  # the file may have changed: look again now
        claims = parse_verified(statement, keys, now=now)
        self._cache.put(statement, (claims, kid), expires=claims.exp, now=now)
        check_claims(claims, audience=audience, workspace=workspace, purposes=purposes)
        return claims


def _key_file(env: Mapping[str, str], name: str, what: str) -> RotatingToken | None:
    path = env.get(name, "").strip()
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError as exc:
        raise TokenSettingError(
            f"{name}={path}: cannot read it ({type(exc).__name__}); mount the {what}"
        ) from None
    if not text:
        raise TokenSettingError(f"{name}={path}: the file is empty; put the {what} in it")
    grace_s = grace_from_env(env, KEY_GRACE_ENV, DEFAULT_GRACE_S)
    return RotatingToken(text, path=path, setting=name, what=what, grace_s=grace_s)


def signer_from_env(env: Mapping[str, str]) -> StatementSigner | None:
    """The OE's signer from AGENTIC_OE_SIGNING_KEY_FILE (None when unset: runtimes get the tokens)."""
    key = _key_file(env, SIGNING_KEY_FILE_ENV, "OE signing key")
    return None if key is None else StatementSigner(key)


def verifier_from_env(env: Mapping[str, str]) -> StatementVerifier | None:
    """A runtime's verifier from AGENTIC_OE_PUBLIC_KEY_FILE (None when unset)."""
    key = _key_file(env, PUBLIC_KEY_FILE_ENV, "OE public key")
    return None if key is None else StatementVerifier(key)

"""The tamper-evident audit (issue 34): a hash chain per execution and a head the OE signs.

Shared by the OE (which links and signs) and the CLI (which verifies an export offline), so it lives
beside execution_token.py and imports nothing of either.

Each audit record carries `seq` (1, 2, ... per execution), `prev_hash` (the previous record's `hash`, ""
for the first) and `hash`: SHA-256 over the record's canonical JSON without `hash`. So editing a record
breaks its own hash, and removing or reordering records breaks the next record's link. What a chain cannot
show alone is its last records removed; so after each append the OE signs the chain's head (execution,
seq, hash) with its Ed25519 key, which the store never holds (it comes from the OE's Secret), and keeps
it in the store: whoever can write the store can truncate the chain but cannot sign a head to match.
Verification needs only the OE's public key, so it also runs offline on an export.

A limit of this design: an attacker who kept an older signed head could cut the chain back to it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

CHAIN_FIELDS = ("seq", "prev_hash", "hash")


def canonical(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's hash covers: every field but `hash`, keys sorted, no spaces. A field that is
    None is left out, so a field added to the record later (None by default) keeps old hashes valid."""
    body = {key: value for key, value in record.items() if key != "hash" and value is not None}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def record_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


def link(record: Mapping[str, Any], *, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """`record` as the next link after `previous` (None: the first of its execution)."""
    linked = dict(record)
    linked["seq"] = int(previous["seq"]) + 1 if previous else 1
    linked["prev_hash"] = str(previous["hash"]) if previous else ""
    linked["hash"] = ""
    linked["hash"] = record_hash(linked)
    return linked


def head_payload(execution_id: str, *, seq: int, digest: str) -> bytes:
    return json.dumps(
        {"execution_id": execution_id, "seq": seq, "hash": digest}, sort_keys=True, separators=(",", ":")
    ).encode()


def signed_head(
    execution_id: str, *, seq: int, digest: str, sign: Callable[[bytes], tuple[str, bytes]] | None
) -> dict[str, Any]:
    """The head to store after appending record `seq`; `sign(payload) -> (key id, signature)`."""
    head: dict[str, Any] = {"execution_id": execution_id, "seq": seq, "hash": digest}
    if sign is not None:
        kid, signature = sign(head_payload(execution_id, seq=seq, digest=digest))
        head["kid"] = kid
        head["signature"] = base64.b64encode(signature).decode()
    return head


@dataclass(frozen=True)
class Verdict:
    """What a verification found: intact, or the first place the chain breaks and why."""

    intact: bool
    records: int
    head_signed: bool
    broken_at: int | None = None  # the seq of the first record that does not fit (or the head's)
    reason: str | None = None

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "intact": self.intact,
            "records": self.records,
            "head_signed": self.head_signed,
        }
        if not self.intact:
            out["broken_at"] = self.broken_at
            out["reason"] = self.reason
        return out


def load_public_keys(pems: Iterable[str]) -> list[Ed25519PublicKey]:
    keys = []
    for pem in pems:
        key = serialization.load_pem_public_key(pem.encode())
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("the OE's public key must be an Ed25519 key (PEM)")
        keys.append(key)
    return keys


def _head_signature_ok(head: Mapping[str, Any], keys: list[Ed25519PublicKey]) -> bool:
    try:
        signature = base64.b64decode(str(head.get("signature", "")), validate=True)
    except ValueError:
        return False
    payload = head_payload(
        str(head.get("execution_id")), seq=int(head.get("seq", 0)), digest=str(head.get("hash"))
    )
    for key in keys:
        try:
            key.verify(signature, payload)
            return True
        except InvalidSignature:
            continue
    return False


def verify(
    records: list[Mapping[str, Any]],
    *,
    head: Mapping[str, Any] | None,
    public_keys: list[Ed25519PublicKey],
    execution_id: str | None = None,
) -> Verdict:
    """Check the chain record by record, then the head (its signature with any of `public_keys`).

    Records written before the chain existed (no `seq`) are skipped only at the start of the log.
    """
    start = next((i for i, record in enumerate(records) if record.get("seq") is not None), len(records))
    chained = list(records[start:])
    if any(record.get("seq") is None for record in chained):
        index = next(i for i, record in enumerate(chained) if record.get("seq") is None)
        return Verdict(False, len(chained), False, index + 1, f"record {index + 1} has no chain link")
    signed = head is not None and bool(head.get("signature"))
    previous: Mapping[str, Any] | None = None
    for index, record in enumerate(chained, start=1):
        seq = record.get("seq")
        if execution_id is not None and record.get("execution_id") != execution_id:
            return Verdict(False, len(chained), signed, index, f"record {seq} belongs to another execution")
        if seq != index:
            missing = (
                "removed or reordered" if isinstance(seq, int) and seq > index else "reordered or duplicated"
            )
            return Verdict(
                False, len(chained), signed, index, f"expected record {index} here, found {seq}: {missing}"
            )
        expected_prev = str(previous["hash"]) if previous else ""
        if record.get("prev_hash") != expected_prev:
            return Verdict(
                False, len(chained), signed, index, f"record {index} does not link to record {index - 1}"
            )
        if record_hash(record) != record.get("hash"):
            return Verdict(
                False, len(chained), signed, index, f"record {index} was edited: its hash does not match"
            )
        previous = record
    if head is None:
        if chained:
            return Verdict(False, len(chained), False, len(chained), "no chain head: the head was removed")
        return Verdict(True, 0, False)
    last_seq = previous["seq"] if previous else 0
    last_hash = previous["hash"] if previous else ""
    if head.get("seq") != last_seq or head.get("hash") != last_hash:
        head_seq = int(head.get("seq", 0) or 0)
        return Verdict(
            False,
            len(chained),
            signed,
            last_seq + 1 if head_seq > last_seq else head_seq + 1,
            f"the signed head names record {head.get('seq')} but the log ends at record {last_seq}: "
            "records were removed from the end, or the head was replaced",
        )
    if signed and not _head_signature_ok(head, public_keys):
        return Verdict(False, len(chained), True, last_seq, "the chain head's signature does not verify")
    if not signed and public_keys:
        return Verdict(False, len(chained), False, last_seq, "the chain head is not signed")
    return Verdict(True, len(chained), signed)


__all__ = ["CHAIN_FIELDS", "Verdict", "link", "load_public_keys", "record_hash", "signed_head", "verify"]

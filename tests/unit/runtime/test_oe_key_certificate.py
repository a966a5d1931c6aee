"""The OE public key given as a certificate (the chart's ConfigMap: Helm prints a public key only inside a
self-signed certificate) reads as the bare key: the same normalized PEM, the same statements verified, the
same ConfigMap name at the operator (issue 27). Pure, plus one file the operator's setting reads."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID

from agent_operator.settings import OperatorSettings
from agent_runtime.execution_token import (
    StatementError,
    StatementSigner,
    StatementVerifier,
    generate_private_key_pem,
    normalize_public_key_pem,
    public_key_pem,
)
from agent_runtime.token_file import RotatingToken, TokenSettingError


def _certificate(private_pem: str, *, days: int = 3650) -> str:
    """A self-signed certificate around the key, as Helm's genSelfSignedCertWithKey makes one."""
    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "oe")])
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=days))
        .sign(key, None)
        .public_bytes(serialization.Encoding.PEM)
        .decode()
    )


def test_a_certificate_and_the_bare_public_key_normalize_to_the_same_pem() -> None:
    private = generate_private_key_pem()
    bare = public_key_pem(private)
    first, second = _certificate(private), _certificate(private, days=30)
    assert first != second  # other serial and dates: what a re-made certificate looks like
    assert normalize_public_key_pem(first) == normalize_public_key_pem(second) == bare
    assert normalize_public_key_pem(bare) == bare
    assert normalize_public_key_pem(f"\n{bare}\n\n") == bare
    assert normalize_public_key_pem(_certificate(generate_private_key_pem())) != bare


def test_a_verifier_given_the_certificate_accepts_the_keys_statements_only() -> None:
    private = generate_private_key_pem()
    signer = StatementSigner(RotatingToken(private, what="OE signing key"))
    verifier = StatementVerifier(RotatingToken(_certificate(private), what="OE public key"))
    statement = signer.issue(audience="tool", agent="a/b", workspace="a.b", execution_id="ex-1")
    assert statement is not None
    assert verifier.verify(statement, audience="tool", workspace="a.b").execution_id == "ex-1"
    other = StatementSigner(RotatingToken(generate_private_key_pem(), what="OE signing key"))
    forged = other.issue(audience="tool", agent="a/b", workspace="a.b", execution_id="ex-1")
    assert forged is not None
    with pytest.raises(StatementError):
        verifier.verify(forged, audience="tool", workspace="a.b")


def test_a_certificate_of_another_key_type_or_garbage_is_refused_naming_the_fix(tmp_path: Path) -> None:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "oe")])
    now = datetime.datetime.now(datetime.UTC)
    ec_cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(ec_key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(ec_key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
        .decode()
    )
    with pytest.raises(TokenSettingError, match="not an Ed25519 key"):
        normalize_public_key_pem(ec_cert)
    broken = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"
    with pytest.raises(TokenSettingError, match="not a PEM public key or certificate"):
        normalize_public_key_pem(broken)
    path = tmp_path / "public-key.pem"
    for text in (ec_cert, broken, "hello"):
        path.write_text(text)
        with pytest.raises(ValueError, match=r"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE=.*copy the OE's public key"):
            OperatorSettings.from_env({"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE": str(path)})


def test_the_operator_reads_a_certificate_file_as_the_keys_pem(tmp_path: Path) -> None:
    private = generate_private_key_pem()
    path = tmp_path / "public-key.pem"
    path.write_text(_certificate(private))
    settings = OperatorSettings.from_env({"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE": str(path)})
    assert settings.render.oe_public_key == public_key_pem(private)

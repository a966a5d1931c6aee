"""The console's OIDC sign-in, pure parts (issue 30): the S256 challenge, the settings, one-time logins and
the authorization request."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from agent_runtime.console.oidc import (
    OIDCSettings,
    PendingLogins,
    authorization_url,
    code_challenge,
    unverified_claims,
)


def test_the_s256_challenge_is_rfc_7636s() -> None:
    # RFC 7636, appendix B.
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert code_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_settings_are_off_without_an_issuer_and_name_what_is_missing() -> None:
    assert OIDCSettings.from_env({}) is None
    with pytest.raises(ValueError, match="OE_CONSOLE_OIDC_ISSUER must be the issuer's https URL"):
        OIDCSettings.from_env({"OE_CONSOLE_OIDC_ISSUER": "http://login.example.test"})
    with pytest.raises(ValueError, match="needs OE_CONSOLE_OIDC_CLIENT_ID"):
        OIDCSettings.from_env({"OE_CONSOLE_OIDC_ISSUER": "https://login.example.test"})
    settings = OIDCSettings.from_env(
        {
            "OE_CONSOLE_OIDC_ISSUER": "https://login.example.test/",
            "OE_CONSOLE_OIDC_CLIENT_ID": "console",
            "OE_CONSOLE_OIDC_SCOPES": "groups",
        }
    )
    expected = OIDCSettings(issuer="https://login.example.test", client_id="console", scopes="openid groups")
    assert settings == expected


def test_a_pending_login_is_taken_once_and_expires() -> None:
    now = [1000.0]
    logins = PendingLogins(clock=lambda: now[0])
    login = logins.start(redirect_uri="https://oe.example.test/console/oidc/callback")
    assert 43 <= len(login.verifier) <= 128 and login.state != login.nonce
    assert logins.take(login.state) == login
    assert logins.take(login.state) is None
    late = logins.start(redirect_uri="x")
    now[0] += 601
    assert logins.take(late.state) is None


def test_the_authorization_request_carries_the_challenge_not_the_verifier() -> None:
    settings = OIDCSettings(issuer="https://login.example.test", client_id="console")
    login = PendingLogins().start(redirect_uri="https://oe.example.test/console/oidc/callback")
    url = authorization_url("https://login.example.test/authorize", settings, login)
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query["code_challenge"] == code_challenge(login.verifier)
    assert query["code_challenge_method"] == "S256" and query["response_type"] == "code"
    assert (query["state"], query["nonce"], query["client_id"]) == (login.state, login.nonce, "console")
    assert login.verifier not in url


def test_claims_are_read_only_from_a_three_part_token() -> None:
    assert unverified_claims("a.b") is None
    assert unverified_claims("a.!!!.c") is None
    assert unverified_claims("e30.eyJub25jZSI6Im4ifQ.sig") == {"nonce": "n"}

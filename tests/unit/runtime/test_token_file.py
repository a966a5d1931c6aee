"""A rotating bearer token: read again when its file changes, the previous one kept for a grace period."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent_runtime.servers.auth import RuntimeTokenError, rotating_runtime_token
from agent_runtime.token_file import RotatingToken, TokenSettingError, grace_from_env
from tests.mounted_secret import mount_secret_key

OLD = "old-runtime-token-1f2e3d"
NEW = "new-runtime-token-9a8b7c"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_changed_file_is_read_again_and_the_previous_token_kept_for_the_grace_period(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    path = mount_secret_key(tmp_path, OLD)
    token = RotatingToken(OLD, path=path, setting="RUNTIME_TOKEN_FILE", grace_s=60, clock=clock)
    assert token.current() == OLD and token.accepted() == (OLD,)
    with caplog.at_level(logging.INFO, logger="agent_runtime.token_file"):
        mount_secret_key(tmp_path, NEW)
        clock.now += 0.5
        # Within the check interval a sender keeps the old token; a receiver presented the new one looks now.
        assert token.current() == OLD
        assert token.accepts(NEW.encode()) and token.accepts(OLD.encode())
        assert token.current() == NEW and token.accepted() == (NEW, OLD)
        clock.now += 59
        assert token.accepts(OLD.encode())
        clock.now += 2
        assert not token.accepts(OLD.encode()) and token.accepted() == (NEW,)
    assert "the runtime token changed" in caplog.text and "no longer accepted" in caplog.text
    assert OLD not in caplog.text and NEW not in caplog.text and OLD not in repr(token)


def test_a_sender_refused_tries_the_file_again_then_the_previous_token(tmp_path: Path) -> None:
    clock = Clock()
    path = mount_secret_key(tmp_path, OLD)
    token = RotatingToken(OLD, path=path, grace_s=60, clock=clock)
    clock.now += 5
    mount_secret_key(tmp_path, NEW)
    # The sender sent OLD, the receiver (already rotated, grace over there) refused: the file has NEW.
    assert token.alternatives(OLD) == (NEW,)
    # The sender sent NEW, the receiver has not seen the change yet: the previous token is worth a try.
    assert token.alternatives(NEW) == (OLD,)
    clock.now += 61
    assert token.alternatives(NEW) == ()


def test_a_missing_or_empty_file_mid_change_keeps_the_last_good_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    path = tmp_path / "token"
    path.write_text(OLD)
    token = RotatingToken(OLD, path=path, setting="RUNTIME_TOKEN_FILE", clock=clock)
    with caplog.at_level(logging.WARNING, logger="agent_runtime.token_file"):
        path.write_text("")
        clock.now += 2
        assert token.current() == OLD
        path.unlink()
        clock.now += 2
        assert token.current() == OLD and token.accepts(OLD.encode())
        path.write_text(NEW + "\n")
        clock.now += 2
        assert token.current() == NEW
    assert "the file is empty" in caplog.text and "cannot be read" in caplog.text
    assert f"RUNTIME_TOKEN_FILE={path}" in caplog.text


def test_a_plain_token_never_changes_and_an_unknown_one_is_refused() -> None:
    token = RotatingToken(OLD)
    assert token.accepts(OLD.encode()) and not token.accepts(NEW.encode()) and not token.accepts(b"")
    assert token.alternatives(OLD) == () and token.refresh() is False


def test_grace_of_zero_drops_the_previous_token_at_once(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(OLD)
    token = RotatingToken(OLD, path=path, grace_s=0)
    path.write_text(NEW)
    assert token.refresh() is True
    assert token.accepted() == (NEW,) and not token.accepts(OLD.encode())


def test_the_grace_setting_is_checked_and_named() -> None:
    assert grace_from_env({}) == 600.0
    assert grace_from_env({"RUNTIME_TOKEN_GRACE_S": "30"}) == 30.0
    assert grace_from_env({"RUNTIME_TOKEN_GRACE_S": "0"}) == 0.0
    with pytest.raises(TokenSettingError, match="RUNTIME_TOKEN_GRACE_S='soon' is not a number of seconds"):
        grace_from_env({"RUNTIME_TOKEN_GRACE_S": "soon"})


def test_the_runtime_token_from_env_follows_its_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(OLD)
    token = rotating_runtime_token({"RUNTIME_TOKEN_FILE": str(path), "RUNTIME_TOKEN_GRACE_S": "5"})
    path.write_text(NEW)
    assert token.refresh() and token.accepted() == (NEW, OLD)
    assert rotating_runtime_token({"RUNTIME_TOKEN": OLD}).accepted() == (OLD,)
    with pytest.raises(RuntimeTokenError, match=r"RUNTIME_TOKEN_GRACE_S=.*0 or more"):
        rotating_runtime_token({"RUNTIME_TOKEN": OLD, "RUNTIME_TOKEN_GRACE_S": "-1"})

"""Every encoding a secret value can leave a process in is redacted; short values are left alone.

The forms are built here with the standard library, independently of the redactor's own construction.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
from urllib.parse import quote, quote_plus

import pytest

from agent_runtime.redaction import (
    MIN_SECRET_LENGTH,
    REDACTED,
    RedactingStream,
    Redactor,
    redact,
    redact_logs,
    redactor_for,
)

pytestmark = pytest.mark.unit

# Characters every encoder treats differently: space, '/', '+', '%', '&', a quote, non-ASCII.
SECRET = 'Pa55 w/rd+%&"é-tok_9Zq'
TOKEN = "ghp_Canary0123456789abcdef"


def url_forms(value: str) -> list[str]:
    forms = {
        quote(value),  # '/' kept
        quote(value, safe=""),
        quote_plus(value),
        quote_plus(value, safe="/"),
        quote(value, safe="/:@!$&'()*+,;="),  # a path-segment encoder
    }
    lower = {re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), form) for form in forms}
    return sorted(forms | lower)


def base64_forms(value: str) -> list[str]:
    data = value.encode()
    forms = []
    for prefix in (b"", b"u:", b"ab:", b"abc:"):  # the value at each of the three byte offsets
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            padded = (
                encode(prefix + data + b"!").decode() if prefix == b"abc:" else encode(prefix + data).decode()
            )
            forms += [padded, padded.rstrip("=")]
    return forms


def every_form(value: str) -> list[str]:
    data = value.encode()
    return [
        value,
        *url_forms(value),
        *base64_forms(value),
        data.hex(),
        data.hex().upper(),
        json.dumps(value)[1:-1],  # JSON-escaped, ASCII only (\u00e9)
        json.dumps(value, ensure_ascii=False)[1:-1],
        value.replace("/", "\\/"),  # PHP-style JSON
        value.replace("&", "&amp;").replace('"', "&quot;"),  # quoted in an HTML error page
    ]


def leaks(text: str, value: str) -> list[str]:
    """Which form of `value` is still in `text` (a base64 form counts by its core: all but its ends)."""
    found = []
    for form in every_form(value):
        probe = form if len(form) < 24 else form[3:-3]
        if probe in text:
            found.append(form)
    return found


@pytest.mark.parametrize(
    ("secret", "form"),
    [
        (secret, form)
        for secret in (SECRET, TOKEN, "sk_test_Canary_stripe_9c2b", "a" * 8)
        for form in every_form(secret)
    ],
)
def test_every_form_is_redacted_in_text_bytes_and_values(secret: str, form: str) -> None:
    redactor = Redactor([secret])
    text = f"before {form} after"
    cleaned = redactor.text(text)
    assert REDACTED in cleaned and not leaks(cleaned, secret), cleaned
    assert cleaned.startswith("before ") and cleaned.endswith(" after")
    raw = redactor.data(text.encode())
    assert not leaks(raw.decode(), secret)
    assert not leaks(json.dumps(redactor.value({"echo": {"headers": [text]}})), secret)


def test_base64_at_each_offset_inside_a_longer_text() -> None:
    redactor = Redactor([TOKEN])
    for prefix in range(12):
        blob = base64.b64encode(b"x" * prefix + TOKEN.encode() + b"y" * 5).decode()
        cleaned = redactor.text(blob)
        assert REDACTED in cleaned
        # What is left is at most two characters of mixed bits on each side of the cut.
        left, _, right = cleaned.partition(REDACTED)
        assert len(blob) - len(left) - len(right) >= len(base64.b64encode(TOKEN.encode())) - 4


def test_short_values_are_left_alone_and_the_threshold_is_eight() -> None:
    assert MIN_SECRET_LENGTH == 8
    assert redact("on 1 x prod1234", ["on", "1", "", "prod123"]) == "on 1 x prod1234"
    assert redact("key=prod1234", ["prod1234"]) == f"key={REDACTED}"
    assert not Redactor(["short"])


def test_every_occurrence_and_longest_first() -> None:
    text = "key=abcd1234efgh again abcd1234efgh and abcd1234"
    assert redact(text, ["abcd1234", "abcd1234efgh"]) == f"key={REDACTED} again {REDACTED} and {REDACTED}"


def test_values_keys_numbers_and_a_value_split_across_strings() -> None:
    redactor = Redactor([TOKEN, "12345678901"])
    half = len(TOKEN) // 2
    result = {
        "body": {"args": {f"key={TOKEN}": ""}},  # a key
        "pin": 12345678901,  # a number
        "parts": ["start ", TOKEN[:half], TOKEN[half:], " end"],  # split across two strings
        "kept": ["plain", 3, True, None],
    }
    cleaned = redactor.value(result)
    text = json.dumps(cleaned)
    assert TOKEN not in "".join(cleaned["parts"]) and "12345678901" not in text
    assert TOKEN[:half] not in text and TOKEN[half:] not in text
    assert list(cleaned["body"]["args"]) == [f"key={REDACTED}"]
    assert cleaned["pin"] == REDACTED
    assert cleaned["parts"][0] == "start " and cleaned["parts"][-1] == " end"
    assert cleaned["kept"] == ["plain", 3, True, None]


def test_a_clean_value_comes_back_as_the_same_object() -> None:
    value = {"body": "nothing secret here", "n": [1, 2.5]}
    assert Redactor([TOKEN]).value(value) is value
    assert Redactor([]).value(value) is value


def test_one_compiled_redactor_per_secret_set() -> None:
    assert redactor_for([TOKEN, SECRET]) is redactor_for([SECRET, TOKEN, "tiny"])
    assert redactor_for([TOKEN]) is not redactor_for([SECRET])


def test_log_lines_are_redacted_message_arguments_and_traceback() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("test_redaction_logs")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        redact_logs(Redactor([TOKEN]), logger=logger)
        redact_logs(Redactor([TOKEN]), logger=logger)  # again: wraps the original, not the wrapper
        logger.warning("sent Authorization: Basic %s", base64.b64encode(f"u:{TOKEN}".encode()).decode())
        try:
            raise ValueError(f"provider said {quote(TOKEN, safe='')}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "ValueError" in out and out.count(REDACTED) == 2
    assert not leaks(out, TOKEN)


def test_printed_lines_are_redacted_even_when_a_value_spans_two_writes() -> None:
    out = io.StringIO()
    stream = RedactingStream(out, Redactor([TOKEN]))
    print("token:", TOKEN[:5], end="", file=stream)  # half a value, no newline yet: nothing written
    assert out.getvalue() == ""
    print(TOKEN[5:], base64.b64encode(TOKEN.encode()).decode(), file=stream)
    print("tail without newline", file=stream, end="")
    stream.close()
    assert not leaks(out.getvalue(), TOKEN) and out.getvalue().count(REDACTED) == 2
    assert out.getvalue().endswith("tail without newline")

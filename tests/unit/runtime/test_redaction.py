from agent_runtime.redaction import REDACTED, redact


def test_every_occurrence_and_longest_first() -> None:
    text = "key=abcd1234 again abcd1234 and abcd"
    assert redact(text, ["abcd", "abcd1234"]) == f"key={REDACTED} again {REDACTED} and {REDACTED}"


def test_short_values_are_left_alone() -> None:
    assert redact("on 1 x", ["on", "1", ""]) == "on 1 x"

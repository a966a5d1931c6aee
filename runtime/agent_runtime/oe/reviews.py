"""Resume bodies (Decision 5, OE-15, OE-16) checked field by field, each problem named with its fix.

The gateway route takes the flat `{decision, reviewer_notes?, args?, value?}` (`value`: a LangGraph
interrupt's resume value, oe/holds.py); the OE's internal route takes the
same object wrapped as `{"human_review": {...}}`. Anything else is a 400 that names the field: a missing or
non-string decision, a decision other than `approved` or `rejected`, a field the body does not have, or
the other route's shape. Offending values are never echoed (a reviewer may paste anything).
"""

from __future__ import annotations

from typing import Any

from agent_runtime.protocol import ReviewDecision

DECISIONS = ("approved", "rejected")
REVIEW_FIELDS = ("decision", "reviewer_notes", "args", "value")
MAX_NOTES_CHARS = 16_384
# A decision, a note and maybe a call's edited arguments; a larger body is a mistake.
MAX_RESUME_BODY_BYTES = 1024 * 1024

_FLAT_EXAMPLE = '{"decision": "approved", "reviewer_notes": "..."}'
_WRAPPED_EXAMPLE = '{"human_review": {"decision": "approved", "reviewer_notes": "..."}}'


class ReviewBodyError(ValueError):
    """The body is not a valid resume body; `problems` is `[{field, problem}]`."""

    def __init__(self, problems: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{p['field']}: {p['problem']}" for p in problems))
        self.problems = problems


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a string" if isinstance(value, str) else type(value).__name__


def _review(value: Any, *, prefix: str) -> ReviewDecision:
    problems: list[dict[str, str]] = []

    def problem(field: str, text: str) -> None:
        problems.append({"field": prefix + field, "problem": text})

    for name in value:
        if name not in REVIEW_FIELDS:
            problem(
                str(name)[:64],
                f"unknown field; a review has only {', '.join(REVIEW_FIELDS)}: remove it",
            )
    decision = value.get("decision")
    if "decision" not in value:
        problem("decision", 'required: "approved" or "rejected"')
    elif not isinstance(decision, str):
        problem("decision", f'must be the string "approved" or "rejected", got {_kind(decision)}')
    elif decision not in DECISIONS:
        problem("decision", 'unknown decision: use "approved" or "rejected"')
    notes = value.get("reviewer_notes")
    if notes is not None and not isinstance(notes, str):
        problem("reviewer_notes", f"must be a string (or left out), got {_kind(notes)}")
    elif isinstance(notes, str) and len(notes) > MAX_NOTES_CHARS:
        problem("reviewer_notes", f"at most {MAX_NOTES_CHARS} characters; shorten the notes")
    args = value.get("args")
    if args is not None and not isinstance(args, dict):
        problem("args", f"must be an object of the call's edited arguments (or left out), got {_kind(args)}")
    if problems:
        raise ReviewBodyError(problems)
    # `value` (any JSON, null too) only when sent: the engine refuses it for holds other than an interrupt.
    extra = {"value": value["value"]} if "value" in value else {}
    return ReviewDecision(decision=decision, reviewer_notes=notes, args=args, **extra)


def flat_review(body: Any) -> ReviewDecision:
    """The gateway route's body: `{decision, reviewer_notes?, args?}`; a `human_review` key is refused."""
    if not isinstance(body, dict):
        raise ReviewBodyError(
            [{"field": "(body)", "problem": f"must be a JSON object like {_FLAT_EXAMPLE}, got {_kind(body)}"}]
        )
    if "human_review" in body:
        raise ReviewBodyError(
            [
                {
                    "field": "human_review",
                    "problem": f"send the flat body {_FLAT_EXAMPLE}; the wrapped form is the OE's "
                    "internal route (POST /resume/{execution_id}) only",
                }
            ]
        )
    return _review(body, prefix="")


def wrapped_review(body: Any) -> ReviewDecision:
    """The internal route's body: `{"human_review": {decision, reviewer_notes?, args?}}` and nothing else."""
    if not isinstance(body, dict):
        raise ReviewBodyError(
            [
                {
                    "field": "(body)",
                    "problem": f"must be a JSON object like {_WRAPPED_EXAMPLE}, got {_kind(body)}",
                }
            ]
        )
    problems = [
        {
            "field": str(name)[:64],
            "problem": "unknown field; this route's body is only human_review: remove it",
        }
        for name in body
        if name != "human_review"
    ]
    if "human_review" not in body:
        problems.insert(
            0,
            {
                "field": "human_review",
                "problem": f"required: this internal route takes {_WRAPPED_EXAMPLE} (the flat body is the "
                "gateway route's, POST /api/v1/projects/{project_id}/executions/{execution_id}/resume)",
            },
        )
    if problems:
        raise ReviewBodyError(problems)
    inner = body["human_review"]
    if not isinstance(inner, dict):
        raise ReviewBodyError(
            [{"field": "human_review", "problem": f"must be an object with a decision, got {_kind(inner)}"}]
        )
    return _review(inner, prefix="human_review.")

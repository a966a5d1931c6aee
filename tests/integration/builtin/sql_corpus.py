"""The SQL guard's corpora, kept as data in tests/fixtures/sql: tricks (no write or side effect may
succeed) and legitimate reads (each must work).

Every trick runs against both real databases, whatever dialect it was written for: a trick for one engine
must not write on the other either. A trick may be refused by the guard (`query_refused`), by the READ ONLY
transaction (`read_only_violation`), by the database otherwise (`query_error`, `forbidden`), or run and
change nothing; the test checks the databases, the other sessions, locks, WAL, files and session state
after each one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PWNED = "/tmp/ae_sqlguard_pwned"  # a file a trick would create
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sql"


@dataclass(frozen=True)
class Trick:
    name: str
    sql: str


@dataclass(frozen=True)
class Read:
    name: str
    sql: str
    params: tuple[object, ...] = ()
    dialect: str = "both"  # both, postgres, mysql


def _lines(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


TRICKS: tuple[Trick, ...] = tuple(Trick(str(t["name"]), str(t["sql"])) for t in _lines("tricks.jsonl"))
READS: tuple[Read, ...] = tuple(
    Read(str(r["name"]), str(r["sql"]), tuple(r.get("params") or ()), str(r.get("engine", "both")))  # type: ignore[arg-type]
    for r in _lines("reads.jsonl")
)

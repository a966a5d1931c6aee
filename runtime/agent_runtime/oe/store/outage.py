"""Whether the store's server answers, as its calls find it: one warning when it goes, one line when back.

A store whose server can be away (PostgreSQL) keeps one `Outage`; each call that found the server gone
reports `lost`, each answered call `answered`. Only the first failure of an outage and the first answer
after it are logged, so the background loops that meet the outage at every tick add no line of their own;
the OE's `/readyz` answers 503 with `reason` while it lasts (its `/healthz` stays 200: a replica cut off
its store is not broken, and restarting it would not bring the store back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass
class Outage:
    what: str  # the server, as the log and the probe name it ("PostgreSQL")
    clock: Callable[[], float] = time.monotonic
    since: float | None = None
    cause: str = ""  # an exception's type name: never a message, which may quote the URL

    @property
    def available(self) -> bool:
        return self.since is None

    def reason(self) -> str | None:
        """Why the store cannot be used now (for `/readyz`), None while it answers."""
        if self.since is None:
            return None
        lasted = self.clock() - self.since
        return f"the store is unavailable: {self.what} did not answer ({self.cause}) for {lasted:.0f} s"

    def lost(self, cause: str) -> bool:
        """A call found the server gone; True (and one warning) when this starts an outage."""
        if self.since is not None:
            return False
        self.since, self.cause = self.clock(), cause
        logger.warning(
            "the store is unavailable: %s did not answer (%s); clients get 503 with Retry-After, /readyz "
            "answers 503 and background work waits until it answers again",
            self.what,
            cause,
        )
        return True

    def answered(self) -> bool:
        """A call was answered; True (and one line) when this ends an outage."""
        if self.since is None:
            return False
        lasted = self.clock() - self.since
        self.since, self.cause = None, ""
        logger.warning("the store is back: %s answers again after %.1f s", self.what, lasted)
        return True

"""Three OE replicas on one PostgreSQL database, each reaching it through its own partition proxy.

`oe-a` takes the AER's calls while it is up (the balancer's first upstream), `oe-b` the clients' invokes,
resumes and reads, `oe-c` the other half of each race (a cancel or a conflicting resume). So the replica
doing a run's work is `oe-a`, except right after a resume, where it is `oe-b`.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

import httpx

from tests.conftest import free_port
from tests.crash.balancer import Balancer
from tests.crash.campaign import OE_TIMINGS, CrashPlatform, ReplicatedPlatform
from tests.crash.partition import PartitionProxy
from tests.integration.loop.harness import CLIENT_TOKEN, Platform
from tests.integration.postgres import RunningPostgres

REPLICAS = ("oe-a", "oe-b", "oe-c")
# How long a partition or a PostgreSQL outage lasts (beyond the first 503 a client saw).
OUTAGE_S = 3.0
# How many cancel-against-resume races: 10 in `make test`, 100 in `make crash` (160 s for 100 measured).
RACES = int(os.environ.get("CRASH_RACES", "10"))
# How many resume-against-resume races: 100 in `make test` too (48 s for the 100 at a load average of 4 on
# the 2 cores, under the 60 s a check in `make test` may take; 109-125 s at 12-20); CRASH_RESUME_RACES
# overrides it.
RESUME_RACES = int(os.environ.get("CRASH_RESUME_RACES", "100"))


@dataclass
class PostgresReplicas(ReplicatedPlatform):
    postgres: RunningPostgres | None = None
    dsn_database: str = ""
    campaign: str = "postgres-3-replicas"
    oe_c_port: int = field(default_factory=free_port)
    proxies: dict[str, PartitionProxy] = field(default_factory=dict)
    # What clients were answered while the store was away: (what, status, retry-after header).
    outage_answers: list[tuple[str, int, str | None]] = field(default_factory=list)

    @property
    def other_url(self) -> str:
        return f"http://127.0.0.1:{self.oe_c_port}"

    def port_of(self, name: str) -> int:
        return {"oe-a": self.oe_port, "oe-b": self.oe_b_port, "oe-c": self.oe_c_port}[name]

    def url_of(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port_of(name)}"

    def start(self) -> PostgresReplicas:
        assert self.postgres is not None
        for name in REPLICAS:
            self.proxies[name] = PartitionProxy(self.postgres.port).start()
        self.balancer = Balancer([self.port_of(name) for name in REPLICAS])
        self.balancer.start()
        CrashPlatform.start(self)
        return self

    def _store_env(self, name: str) -> dict[str, str]:
        assert self.postgres is not None
        dsn = self.postgres.dsn(self.dsn_database).replace(
            f":{self.postgres.port}/", f":{self.proxies[name].port}/"
        )
        return {
            **OE_TIMINGS,
            "OE_STORE_TYPE": "postgres",
            "OE_POSTGRES_URL": dsn,
            "OE_POSTGRES_POOL_SIZE": "8",
            # A partition is noticed within 2 s (3 with the client's own margin), not the default 10.
            "OE_POSTGRES_STATEMENT_TIMEOUT_S": "2",
            # Three OEs, an AER and a Tool Pod restarting on 2 busy cores: an AER restart can take 6 s.
            "OE_AER_LOST_AFTER_S": "5",
        }

    def start_oe(self, *, extra: dict[str, str] | None = None) -> None:
        for name in REPLICAS:
            self.start_replica(name)

    def start_replica(self, name: str) -> None:
        saved, self.oe_port = self.oe_port, self.port_of(name)
        try:
            Platform.start_oe(self, extra=self._store_env(name))
        finally:
            self.oe_port = saved
        self.processes[name] = self.processes.pop("oe")

    def crash(self, name: str) -> None:
        """`partition:drop` / `partition:blackhole`: cut `oe-a` (the AER's replica) off PostgreSQL, then
        heal; `postgres`: SIGKILL PostgreSQL and start it again; otherwise SIGKILL a process."""
        if name.startswith("partition:"):
            mode = name.split(":", 1)[1]
            self.proxies["oe-a"].cut(mode)  # type: ignore[arg-type]
            self._probe(name, "oe-a")
            time.sleep(OUTAGE_S)
            self.proxies["oe-a"].heal()
            return
        if name == "postgres":
            assert self.postgres is not None
            self.postgres.stop(sig=signal.SIGKILL)
            self._probe(name, "oe-b")
            time.sleep(OUTAGE_S)
            self.postgres.start()
            return
        super().crash(name)

    def _probe(self, what: str, replica: str) -> None:
        """A client's read at `replica` while its store is away: it must be a 503 with Retry-After."""
        headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
        with httpx.Client(base_url=self.url_of(replica), headers=headers, timeout=30) as client:
            response = client.get("/executions")
        self.outage_answers.append((what, response.status_code, response.headers.get("retry-after")))

    def stop(self) -> None:
        super().stop()
        for proxy in self.proxies.values():
            proxy.stop()

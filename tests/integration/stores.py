"""One backend of a store suite (SQLite or MongoDB on FerretDB), for every store the runtime has."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class OpenClose(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...


S = TypeVar("S", bound=OpenClose)


@dataclass
class Backend(Generic[S]):
    """One backend's data: `make()` is a new store on it (as another replica or process would open it)."""

    name: str
    make: Callable[[], S]

    def run(self, scenario: Callable[[S], Awaitable[T]]) -> T:
        """Run `scenario` on an open store in a fresh event loop; the store is closed afterwards."""

        async def main() -> T:
            store = self.make()
            await store.open()
            try:
                return await scenario(store)
            finally:
                await store.close()

        return asyncio.run(main())


__all__ = ["Backend"]

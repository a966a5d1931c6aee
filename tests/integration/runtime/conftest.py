from collections.abc import Iterator

import pytest

from tests.providers.echo_provider import RunningProvider, running_echo_provider


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    with running_echo_provider() as running:
        yield running

import pytest

from agent_runtime.listen import DUAL_STACK_HOST, IPV4_HOST, choose_listen_host, resolve_listen_host


@pytest.mark.parametrize(
    ("app_host", "dual_stack", "expected"),
    [
        (None, True, DUAL_STACK_HOST),
        (None, False, IPV4_HOST),
        ("", True, DUAL_STACK_HOST),
        ("127.0.0.1", True, "127.0.0.1"),
        (" ::1 ", False, "::1"),
    ],
)
def test_choose_listen_host(app_host: str | None, dual_stack: bool, expected: str) -> None:
    assert choose_listen_host(app_host=app_host, dual_stack=dual_stack) == expected


def test_app_host_overrides_probe() -> None:
    assert resolve_listen_host({"APP_HOST": "127.0.0.2"}) == "127.0.0.2"


def test_probe_answers_one_of_the_two_hosts() -> None:
    assert resolve_listen_host({}) in {DUAL_STACK_HOST, IPV4_HOST}

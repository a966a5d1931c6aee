"""ChatCompletionsModel construction and from_env: nothing is read from the environment but names."""

from __future__ import annotations

import pytest

from agent_runtime.contract import LLM_API_KEY_ENV_ENV, LLM_BASE_URL_ENV, LLM_MODEL_ENV, is_platform_env
from agent_runtime.llm import ChatCompletionsModel

KEY_LIKE = "sk-proj-Abc123DEF456"


def test_llm_variables_are_platform_variables() -> None:
    for name in (LLM_BASE_URL_ENV, LLM_MODEL_ENV, LLM_API_KEY_ENV_ENV):
        assert is_platform_env(name)


def test_from_env_reads_the_three_variables_and_never_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_LLM_KEY", raising=False)  # the key need not exist until a call
    model = ChatCompletionsModel.from_env(
        {
            LLM_BASE_URL_ENV: "https://llm.example/v1/",
            LLM_MODEL_ENV: "gpt-test",
            LLM_API_KEY_ENV_ENV: "MY_LLM_KEY",
        },
        timeout_s=5,
    )
    assert (model.base_url, model.model, model.api_key_env) == (
        "https://llm.example/v1",
        "gpt-test",
        "MY_LLM_KEY",
    )
    assert repr(model) == (
        "ChatCompletionsModel(base_url='https://llm.example/v1', model='gpt-test', "
        "api_key_env='MY_LLM_KEY', timeout_s=5.0)"
    )


def test_from_env_without_a_key_variable_sends_no_key() -> None:
    model = ChatCompletionsModel.from_env({LLM_BASE_URL_ENV: "http://127.0.0.1:1/v1", LLM_MODEL_ENV: "m"})
    assert model.api_key_env is None


@pytest.mark.parametrize("missing", [LLM_BASE_URL_ENV, LLM_MODEL_ENV])
def test_from_env_names_the_missing_variable(missing: str) -> None:
    env = {LLM_BASE_URL_ENV: "http://127.0.0.1:1/v1", LLM_MODEL_ENV: "m"}
    env[missing] = "  "
    with pytest.raises(ValueError, match=missing):
        ChatCompletionsModel.from_env(env)


def test_a_key_given_where_its_variable_name_belongs_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError, match="api_key_env") as caught:
        ChatCompletionsModel(base_url="http://127.0.0.1:1/v1", model="m", api_key_env=KEY_LIKE)
    assert KEY_LIKE not in str(caught.value)


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("ftp://llm.example/v1", "http"),
        ("llm.example/v1", "http"),
        ("https://user:pw@llm.example/v1", "credentials"),
        ("https://llm.example/v1?api-version=1", "query"),
    ],
)
def test_bad_base_urls_are_refused(base_url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as caught:
        ChatCompletionsModel(base_url=base_url, model="m")
    assert "pw" not in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model": ""}, "model"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"max_response_bytes": 0}, "max_response_bytes"),
        ({"default_options": {"stream": True}}, "default_options"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, field: str) -> None:
    settings = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=field):
        ChatCompletionsModel(**settings)

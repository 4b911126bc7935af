"""infer_model: model strings, and that importing toolrun.models imports no provider SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

import toolrun.models
from toolrun.models import (
    AnthropicModel,
    FunctionModel,
    ModelRequest,
    OpenAIModel,
    ScriptedModel,
    UnknownModelError,
    UserMessage,
    infer_model,
)
from toolrun.models._infer import OLLAMA_BASE_URL


def test_openai() -> None:
    model = infer_model("openai:gpt-4o-mini")
    assert isinstance(model, OpenAIModel)
    assert (model.model_name, model.base_url, model.name) == ("gpt-4o-mini", None, "openai:gpt-4o-mini")
    assert model.strict_tools is True


def test_openai_fine_tuned_names_keep_their_colons() -> None:
    model = infer_model("openai:ft:gpt-4o-mini:acme::abc123")
    assert isinstance(model, OpenAIModel)
    assert model.model_name == "ft:gpt-4o-mini:acme::abc123"


def test_anthropic() -> None:
    model = infer_model("anthropic:claude-haiku-4-5", max_tokens=512)
    assert isinstance(model, AnthropicModel)
    assert (model.model_name, model.max_tokens, model.name) == (
        "claude-haiku-4-5",
        512,
        "anthropic:claude-haiku-4-5",
    )


@pytest.mark.parametrize(
    ("spec", "url", "name"),
    [
        ("openai-compatible:http://127.0.0.1:11434/v1:llama3.1", "http://127.0.0.1:11434/v1", "llama3.1"),
        (
            "openai-compatible:http://127.0.0.1:11434/v1:llama3.1:8b",
            "http://127.0.0.1:11434/v1",
            "llama3.1:8b",
        ),
        (
            "openai-compatible:http://localhost:8000/v1:Qwen/Qwen2.5-7B",
            "http://localhost:8000/v1",
            "Qwen/Qwen2.5-7B",
        ),
        (
            "openai-compatible:https://llm.example.com/v1:gpt-oss-20b",
            "https://llm.example.com/v1",
            "gpt-oss-20b",
        ),
        ("openai-compatible:http://127.0.0.1:8080:local-model", "http://127.0.0.1:8080", "local-model"),
        ("openai-compatible:http://gpu-box/v1:mistral", "http://gpu-box/v1", "mistral"),
        ("openai-compatible:http://[::1]:1234/v1:phi4:latest", "http://[::1]:1234/v1", "phi4:latest"),
        ("ollama:llama3.1:8b", OLLAMA_BASE_URL, "llama3.1:8b"),
    ],
)
def test_openai_compatible(spec: str, url: str, name: str) -> None:
    model = infer_model(spec)
    assert isinstance(model, OpenAIModel)
    assert (model.base_url, model.model_name) == (url, name)
    assert model.strict_tools is False
    if spec.startswith("openai-compatible:"):
        assert model.name == spec  # the name reads back as the string it came from


def test_openai_compatible_never_sends_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret")
    model = infer_model("openai-compatible:http://127.0.0.1:9/v1:m")
    assert isinstance(model, OpenAIModel)
    assert model._api_key == "not-needed"
    assert infer_model("openai-compatible:http://127.0.0.1:9/v1:m", api_key="vllm-key")._api_key == "vllm-key"  # type: ignore[attr-defined]


async def test_test_model_echoes() -> None:
    model = infer_model("test")
    assert isinstance(model, FunctionModel)
    assert model.name == "test"
    assert (await model.request(ModelRequest([UserMessage(content="ping")]))).text == "ping"


def test_model_instances_pass_through() -> None:
    model = ScriptedModel(["x"])
    assert infer_model(model) is model
    with pytest.raises(TypeError):
        infer_model(model, api_key="k")


@pytest.mark.parametrize(
    "spec",
    [
        "gpt-4o",
        "openai:",
        "mystery:model",
        "openai-compatible:127.0.0.1:11434:llama",
        "openai-compatible:http://127.0.0.1:11434/v1",
        "openai-compatible:ftp://host/v1:m",
        "",
    ],
)
def test_unreadable_strings(spec: str) -> None:
    with pytest.raises(UnknownModelError) as info:
        infer_model(spec)
    assert isinstance(info.value, ValueError)
    assert "openai" in str(info.value)


def test_refuses_conflicting_options() -> None:
    with pytest.raises(ValueError, match="client="):
        OpenAIModel("m", client=object(), base_url="http://127.0.0.1/v1")
    with pytest.raises(ValueError, match="retry="):
        AnthropicModel("m", max_retries=1, retry=toolrun.models.RetryPolicy())
    with pytest.raises(ValueError, match="model name"):
        OpenAIModel("")


def test_importing_models_imports_no_provider_sdk() -> None:
    code = (
        "import sys, toolrun, toolrun.models; "
        "toolrun.models.infer_model('openai:gpt-4o'); "
        "toolrun.models.infer_model('anthropic:claude-haiku-4-5'); "
        "bad = [m for m in ('openai', 'anthropic', 'httpx', 'httpx2') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_public_surface() -> None:
    assert sorted(toolrun.models.__all__) == sorted(
        [
            "AnthropicModel",
            "AssistantMessage",
            "FinalResponse",
            "FinishReason",
            "FunctionModel",
            "Message",
            "Model",
            "ModelRequest",
            "ModelResponse",
            "ModelSettings",
            "OpenAIModel",
            "ProviderAuthError",
            "ProviderBadRequestError",
            "ProviderError",
            "ProviderRateLimitError",
            "ProviderResponseError",
            "ProviderStreamError",
            "ProviderUnavailableError",
            "RetryPolicy",
            "ScriptExhaustedError",
            "ScriptedModel",
            "StreamEvent",
            "SystemMessage",
            "ModelTextDelta",
            "ToolCallDelta",
            "ToolCallReady",
            "ToolChoice",
            "ToolResultMessage",
            "UnknownModelError",
            "Usage",
            "UserMessage",
            "history_problems",
            "infer_model",
            "messages_from_json",
            "messages_to_json",
        ]
    )
    for name in toolrun.models.__all__:
        assert hasattr(toolrun.models, name)

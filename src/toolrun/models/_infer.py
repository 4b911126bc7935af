"""`infer_model`: a model from a configuration string."""

from __future__ import annotations

import re
from typing import Any

from toolrun.models._base import Model
from toolrun.models._errors import UnknownModelError

__all__ = ["OLLAMA_BASE_URL", "infer_model"]

OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
"""Where `"ollama:MODEL"` points: Ollama's OpenAI-compatible API on this machine."""

# scheme://host[:port][/path], then ":" and the model name. The path may not contain ":"; the model name
# may (Ollama's "llama3.1:8b"), which is why the URL is matched by its shape rather than split on a ":".
_COMPATIBLE = re.compile(
    r"^(?P<url>https?://(?:[^/@]*@)?(?:\[[^\]/]+\]|[^/:\[\]]+)(?::\d+)?(?:/[^:]*)?):(?P<model>[^:].*)$",
    re.IGNORECASE,
)

_FORMS = (
    '"openai:gpt-4o-mini", "anthropic:claude-haiku-4-5", '
    '"openai-compatible:http://127.0.0.1:11434/v1:llama3.1", "ollama:llama3.1" or "test"'
)


def infer_model(model: Model | str, **kwargs: Any) -> Model:
    """A model from a string (a `Model` passes through unchanged).

    Forms:

    - `"openai:gpt-4o-mini"`: `OpenAIModel("gpt-4o-mini")` on OpenAI; key from `OPENAI_API_KEY`
      (`OPENAI_BASE_URL` honoured).
    - `"anthropic:claude-haiku-4-5"`: `AnthropicModel("claude-haiku-4-5")`; key from `ANTHROPIC_API_KEY`.
    - `"openai-compatible:http://127.0.0.1:11434/v1:llama3.1"`:
      `OpenAIModel("llama3.1", base_url="http://127.0.0.1:11434/v1")` (vLLM, Ollama, llama.cpp, LM Studio).
    - `"ollama:llama3.1:8b"`: the same as `"openai-compatible:http://127.0.0.1:11434/v1:llama3.1:8b"`.
    - `"test"`: `FunctionModel(echo)`, which answers with the last user message and calls no tools.

    In `openai-compatible:URL:MODEL` the URL is `http(s)://host[:port][/path]` (a path without `:`) and the
    model is everything after the `:` that follows it, so model names with colons (`llama3.1:8b`) work.
    Such servers get the `api_key` you pass, or a placeholder: your `OPENAI_API_KEY` is never sent to a
    server other than OpenAI's by this form.

    Args:
        model: The string, or a model.
        **kwargs: Passed to the model's constructor (`api_key=`, `settings=`, `retry=`, ...).

    Raises:
        UnknownModelError: the string has none of the forms above.
    """
    if not isinstance(model, str):
        if kwargs:
            raise TypeError("Options apply to model strings; configure a Model instance directly.")
        return model
    spec = model.strip()
    if spec == "test":
        from toolrun.models.function import FunctionModel, echo

        return FunctionModel(echo, name="test", **kwargs)
    provider, sep, rest = spec.partition(":")
    provider = provider.lower()
    if not sep or not rest:
        raise UnknownModelError(f"Cannot read model string {model!r}: use {_FORMS}.")
    if provider == "openai":
        from toolrun.models.openai import OpenAIModel

        return OpenAIModel(rest, **kwargs)
    if provider == "anthropic":
        from toolrun.models.anthropic import AnthropicModel

        return AnthropicModel(rest, **kwargs)
    if provider in ("openai-compatible", "ollama"):
        from toolrun.models.openai import OpenAIModel

        if provider == "ollama":
            base_url, model_name = OLLAMA_BASE_URL, rest
        else:
            match = _COMPATIBLE.match(rest)
            # "http://host:11434/v1" alone would read as host "host" and model "11434/v1": a port, no model.
            if match is None or re.fullmatch(r"\d+(?:/[^:]*)?", match["model"]):
                raise UnknownModelError(
                    f"Cannot read {model!r}: write openai-compatible:URL:MODEL, with an http(s) URL, e.g. "
                    '"openai-compatible:http://127.0.0.1:11434/v1:llama3.1".'
                )
            base_url, model_name = match["url"], match["model"]
        kwargs.setdefault("api_key", "not-needed")
        return OpenAIModel(model_name, base_url=base_url, **kwargs)
    raise UnknownModelError(f"Unknown model provider {provider!r} in {model!r}: use {_FORMS}.")

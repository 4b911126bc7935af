"""LLM clients behind one `Model` protocol, and test models that ship with toolrun.

```python
from toolrun.models import ModelRequest, UserMessage, infer_model

model = infer_model("openai:gpt-4o-mini")     # or OpenAIModel(...), AnthropicModel(...), ScriptedModel(...)
response = await model.request(ModelRequest([UserMessage(content="Hi")], tools=registry))
response.text, response.tool_calls, response.usage, response.finish_reason
```

Importing this package imports no provider SDK: `OpenAIModel` and `AnthropicModel` import theirs on first use.
"""

from toolrun.models._base import Model, RetryPolicy
from toolrun.models._errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderStreamError,
    ProviderUnavailableError,
    ScriptExhaustedError,
    UnknownModelError,
)
from toolrun.models._history import history_problems
from toolrun.models._infer import infer_model
from toolrun.models._messages import (
    AssistantMessage,
    FinalResponse,
    FinishReason,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelTextDelta,
    StreamEvent,
    SystemMessage,
    ToolCallDelta,
    ToolCallReady,
    ToolChoice,
    ToolResultMessage,
    Usage,
    UserMessage,
    messages_from_json,
    messages_to_json,
)
from toolrun.models.anthropic import AnthropicModel
from toolrun.models.function import FunctionModel
from toolrun.models.openai import OpenAIModel
from toolrun.models.scripted import ScriptedModel

__all__ = [
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
    "ModelTextDelta",
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

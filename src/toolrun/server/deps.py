"""FastAPI dependencies: the app's parts and the current user. Routes and adapters use only these.

```python
@router.post("/api/v1/my-format")
async def my_format(body: ChatRequest, user: CurrentUser, chat: Chat) -> ...:
    handle = await chat.start_message(user, body.message, conversation_id=body.conversation_id)
    async for event in handle: ...
```
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolrun.server._errors import ServiceError
from toolrun.server._service import ChatService
from toolrun.server._state import ServerState
from toolrun.server._users import Principal

__all__ = [
    "Chat",
    "CurrentUser",
    "State",
    "admit_run",
    "get_chat_service",
    "get_current_user",
    "get_state",
]

_bearer = HTTPBearer(auto_error=False, description="An API token from `toolrun users add NAME`.")


# Dependencies are `async def`: FastAPI runs plain `def` ones in a thread pool, a thread hop per request.
def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.toolrun
    return state


async def get_state(request: Request) -> ServerState:
    return _state(request)


async def get_chat_service(request: Request) -> ChatService:
    return _state(request).chat


async def admit_run(request: Request) -> None:
    """Refuse a request that would start a run while the process is full: `503` with `Retry-After`,
    before the body is read. Streaming routes whose protocol reports errors inside the stream (AG-UI, the
    AI SDK) take it as a route dependency so that a shed request is a plain 503, not a stream with an error
    event. The chat service checks again when the run starts (the count is kept there)."""
    _state(request).chat.admission.check()


async def get_current_user(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The user of the request's bearer token; 401 problem when missing, unknown or revoked."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ServiceError(401, "unauthorized", "Send an API token as `Authorization: Bearer TOKEN`.")
    principal = await _state(request).users.authenticate(credentials.credentials)
    if principal is None:
        raise ServiceError(401, "unauthorized", "The token is unknown or revoked.")
    request.scope.setdefault("state", {})["user_id"] = principal.user_id
    return principal


State = Annotated[ServerState, Depends(get_state)]
Chat = Annotated[ChatService, Depends(get_chat_service)]
CurrentUser = Annotated[Principal, Depends(get_current_user)]

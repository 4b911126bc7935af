"""The task assistant as an HTTP service: `create_app(Settings())`.

```python
from toolrun.server import Settings, create_app

app = create_app(Settings())        # reads TOOLRUN_* from the environment (and .env); no module-level app
```

Parts: `schemas` (request/response bodies), `deps` (FastAPI dependencies: state, current user, chat
service), `routes/<resource>.py` (one router each, listed in `ROUTERS`), `sse` (the toolrun SSE adapter),
`migrate` (Alembic). The chat service and its event stream (`ChatService`, `RunHandle`, the events in
`toolrun.server.events`) are what every wire format adapts; see docs/service.md.

This package needs the `server` extra and is never imported by `import toolrun`.
"""

from toolrun.server._app import ROUTERS, create_app
from toolrun.server._errors import ServiceError
from toolrun.server._service import ChatService, RunHandle
from toolrun.server._settings import Settings, SettingsError
from toolrun.server._state import ServerState
from toolrun.server._users import Principal, UserStore

__all__ = [
    "ROUTERS",
    "ChatService",
    "Principal",
    "RunHandle",
    "ServerState",
    "ServiceError",
    "Settings",
    "SettingsError",
    "UserStore",
    "create_app",
]

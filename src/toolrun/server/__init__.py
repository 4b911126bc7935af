"""An assistant of your own as an HTTP service: an `App`, served by `create_app(settings, app=app)`.

```python
from toolrun.server import App, Panel, Settings, create_app

app = App(name="notes", title="Notes",
          tools=[add_note, list_notes], panel=Panel(title="N", tool="list_notes"))
api = create_app(Settings(), app=app)   # reads TOOLRUN_* from the environment (and .env); no module-level app
mount(host, app, prefix="/assistant", user=current_user)   # inside your own FastAPI app, your auth
```

Without an app, the task assistant (`toolrun.apps.tasks:app`) is served.

Parts: `schemas` (request/response bodies), `deps` (FastAPI dependencies: state, current user, chat
service), `routes/<resource>.py` (one router each, listed in `_app.ROUTERS`), `sse` (the toolrun SSE adapter),
`migrate` (Alembic). The chat service and its event stream (`ChatService`, `RunHandle`, the events in
`toolrun.server.events`) are what every wire format adapts; see docs/service.md.

This package needs the `server` extra and is never imported by `import toolrun`.
"""

from toolrun.server._app import create_app
from toolrun.server._apps import App, AppError, AppResources, Panel, load_app
from toolrun.server._errors import ServiceError
from toolrun.server._mount import mount
from toolrun.server._service import ChatService, RunHandle
from toolrun.server._settings import Settings, SettingsError
from toolrun.server._state import ServerState
from toolrun.server._users import Principal, UserStore

__all__ = [
    "App",
    "AppError",
    "AppResources",
    "ChatService",
    "Panel",
    "Principal",
    "RunHandle",
    "ServerState",
    "ServiceError",
    "Settings",
    "SettingsError",
    "UserStore",
    "create_app",
    "load_app",
    "mount",
]

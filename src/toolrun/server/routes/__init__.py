"""One router per resource; `toolrun.server._app.ROUTERS` registers them."""

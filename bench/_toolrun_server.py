"""toolrun's service for bench/service.py, as `toolrun serve` runs it (same uvicorn options, JSON logs),
with the model over HTTP through the chosen `OpenAIModel` transport. Settings from the environment.

    python bench/_toolrun_server.py PORT MODEL_BASE_URL TRANSPORT      # TRANSPORT: httpx | sdk | default
"""

from __future__ import annotations

import os
import sys

import uvicorn

from toolrun.models import OpenAIModel
from toolrun.server import Settings, create_app
from toolrun.server._observe import configure_logging

if __name__ == "__main__":
    port, model_url, transport = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if hasattr(os, "sched_setaffinity") and os.environ.get("BENCH_SERVER_CPU"):
        os.sched_setaffinity(0, {int(os.environ["BENCH_SERVER_CPU"])})
    settings = Settings()
    configure_logging(settings.log_level)
    # "default": whatever OpenAIModel does by default (an older toolrun, given with --baseline-src, has no
    # `transport` option).
    options = {} if transport == "default" else {"transport": transport}
    model = OpenAIModel("scripted", base_url=model_url, api_key="not-needed", **options)
    uvicorn.run(
        create_app(settings, model=model),
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        timeout_keep_alive=75,
    )

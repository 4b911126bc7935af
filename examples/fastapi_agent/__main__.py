"""`python examples/fastapi_agent [--host H] [--port P]`: serve the agent (default http://127.0.0.1:8000)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn

from fastapi_agent.app import create_app

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve the FastAPI agent example.")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args()
    print(f"Serving on http://{args.host}:{args.port} (POST /agent/chat, POST /agent/stream)", flush=True)
    uvicorn.run(create_app(), host=args.host, port=args.port)

"""`python examples/fastapi_agent`: serve the agent on http://127.0.0.1:8000 (needs uvicorn)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn

from fastapi_agent.app import create_app

if __name__ == "__main__":
    uvicorn.run(create_app(), host="127.0.0.1", port=8000)

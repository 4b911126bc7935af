"""`python examples/conference_assistant "question" [--user ID]`: one turn of the assistant."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conference_assistant.graph import build_graph


async def main(question: str, user: str) -> None:
    app = build_graph()
    config = {"configurable": {"thread_id": uuid.uuid4().hex, "user_id": user}}
    state = await app.ainvoke({"question": question}, config)
    print(state["answer"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Ask the conference assistant.")
    parser.add_argument("question")
    parser.add_argument("--user", default="attendee-1")
    args = parser.parse_args()
    asyncio.run(main(args.question, args.user))

"""A small task assistant on a real model — or on a scripted one when no model is configured.

Run it against a provider by naming the model (toolrun's model strings):

    TOOLRUN_MODEL=openai:gpt-4o-mini      OPENAI_API_KEY=sk-...      python examples/task_agent.py
    TOOLRUN_MODEL=anthropic:claude-haiku-4-5   ANTHROPIC_API_KEY=...  python examples/task_agent.py

Or against a model on your own machine, through its OpenAI-compatible API:

    # Ollama:  ollama pull llama3.1 && ollama serve        (serves http://127.0.0.1:11434/v1)
    TOOLRUN_MODEL=ollama:llama3.1 python examples/task_agent.py
    # vLLM:    vllm serve Qwen/Qwen2.5-7B-Instruct --enable-auto-tool-choice --tool-call-parser hermes
    export TOOLRUN_MODEL=openai-compatible:http://127.0.0.1:8000/v1:Qwen/Qwen2.5-7B-Instruct
    python examples/task_agent.py

Models that cannot call tools natively still work in planner mode: add TOOLRUN_MODE=planner.

Without TOOLRUN_MODEL the example uses a ScriptedModel, so it runs anywhere (this is how the tests run it).
Deleting a task is destructive: the run pauses and asks you (answer y/n; without a terminal it denies).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from typing import Any, Literal

from toolrun import Agent, ToolCall, ToolContext, ToolError, ToolRegistry, tool
from toolrun.models import Model, ScriptedModel, infer_model

TASKS: dict[str, dict[str, Any]] = {}
_ids = itertools.count(1)
registry = ToolRegistry()


@registry.register
def add_task(title: str, priority: Literal["low", "normal", "high"] = "normal") -> dict[str, Any]:
    """Create a task. Use when the user asks to remember or plan something.

    Args:
        title: What to do, in a few words.
        priority: How urgent it is.
    """
    if not title.strip():
        raise ToolError("EMPTY_TITLE", "The title is empty.", recover_action="Ask the user what the task is.")
    task = {"id": f"t{next(_ids)}", "title": title.strip(), "priority": priority, "done": False}
    TASKS[task["id"]] = task
    return task


@registry.register(read_only=True)
def list_tasks(include_done: bool = False) -> list[dict[str, Any]]:
    """List the user's tasks. Use before changing a task whose id you do not know.

    Args:
        include_done: Also list finished tasks.
    """
    return [t for t in TASKS.values() if include_done or not t["done"]]


@tool(destructive=True)
def delete_task(task_id: str) -> dict[str, Any]:
    """Delete a task permanently. Use only when the user explicitly asks to delete it.

    Args:
        task_id: The task's id, e.g. "t1".
    """
    if task_id not in TASKS:
        raise ToolError("TASK_NOT_FOUND", f"No task {task_id!r}.", recover_action="List the tasks first.")
    return {"deleted": TASKS.pop(task_id)["id"]}


registry.register(delete_task)


def choose_model() -> Model:
    name = os.environ.get("TOOLRUN_MODEL")
    if name:
        return infer_model(name)
    print("(TOOLRUN_MODEL is not set: using a scripted model. See the docstring to use a real one.)")
    return ScriptedModel(
        [
            ToolCall(name="add_task", arguments={"title": "Buy milk", "priority": "high"}),
            ToolCall(name="list_tasks", arguments={}),
            ToolCall(name="delete_task", arguments={"task_id": "t1"}),
            "I added 'Buy milk', listed your tasks, and handled the deletion as you decided.",
        ]
    )


def ask(question: str) -> bool:
    if not sys.stdin.isatty():
        print(f"{question} [no terminal: denied]")
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


async def main() -> int:
    mode: Literal["native", "planner"] = (
        "planner" if os.environ.get("TOOLRUN_MODE") == "planner" else "native"
    )
    agent = Agent(
        choose_model(),
        registry,
        mode=mode,
        instructions="You manage the user's task list. Be brief. Never delete without being asked.",
        timeout=120,
    )
    context = ToolContext(user_id="demo-user")
    request = " ".join(sys.argv[1:]) or "Add 'Buy milk' as high priority, show my tasks, then delete t1."
    run = await agent.run(request, context=context)
    while run.status == "awaiting_confirmation":
        approvals = {p.confirmation_id: ask(f"Allow: {p.summary}?") for p in run.pending}
        run = await agent.resume(run, approvals, context=context)
    for record in run.tool_calls:
        print(f"  tool {record.call.name}: {record.result.status} {record.result.render()[:100]}")
    print(f"[{run.status}] {run.output or run.error}")
    print(
        f"tokens: {run.usage.input_tokens} in, {run.usage.output_tokens} out, {run.usage.requests} requests"
    )
    return 0 if run.status in ("completed", "needs_user_input") else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

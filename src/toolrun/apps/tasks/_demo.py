"""The demo model: an offline, deterministic stand-in for an LLM that drives the task tools.

It reads the last user message with a small grammar (case does not matter), calls one task tool, and
answers from the tool's result. Anything else gets a reply saying what it understands and how to
configure a real model. It is labelled `demo` everywhere (model name, API, page).

| you type                                                    | it calls                                  |
| ----------------------------------------------------------- | ----------------------------------------- |
| `add <title> [!low/!medium/!high/!critical] [due <date>] [#tag]...` (or `create`, `new`) | `create_task` |
| `list` / `list tasks` / `list <pending/in_progress/done> tasks` / `show tasks` | `query_tasks`        |
| `search <words>` / `find <words>`                          | `query_tasks` with `filters.text`         |
| `done <task_id>` / `complete <task_id>` / `start <task_id>` | `set_task_status` (done / in_progress) |
| `delete <task_id>` / `remove <task_id>`                    | `delete_task` (asks for confirmation)     |
| `attach <url> to <task_id> [as <title>]`                   | `add_attachment`                          |
| `attachments <task_id>`                                     | `list_attachments`                        |
| `detach <attachment_id>`                                    | `delete_attachment` (asks for confirmation) |
| `refresh <attachment_id>`                                   | `refresh_attachment`                      |
| `help`                                                      | nothing: lists this grammar               |

`<date>` is ISO 8601 (`2026-12-01`, `2026-12-01T17:00:00Z`), or `today` / `tomorrow`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from toolrun.models import (
    AssistantMessage,
    FunctionModel,
    Message,
    ModelResponse,
    ToolResultMessage,
    UserMessage,
)
from toolrun.tools import Tool, ToolCall

__all__ = ["DEMO_HELP", "create_demo_model", "demo_reply", "parse_command"]

DEMO_HELP = (
    "I am the demo model: an offline stand-in that understands a few commands for your tasks.\n"
    "- add <title> [!low|!medium|!high|!critical] [due 2026-12-01|today|tomorrow] [#tag ...]\n"
    "- list tasks | list pending tasks | list done tasks\n"
    "- search <words>\n"
    "- done <task_id> | start <task_id>\n"
    "- delete <task_id> (I ask you to confirm first)\n"
    "- attach <url> to <task_id> [as <title>] | attachments <task_id> | detach <attachment_id>\n"
    "- refresh <attachment_id> (GitHub pull requests and issues)\n"
    "For free-form chat, configure a real model: TOOLRUN_MODEL=openai:gpt-4o-mini (with OPENAI_API_KEY), "
    "anthropic:claude-haiku-4-5 (with ANTHROPIC_API_KEY) or ollama:llama3.1, then restart the server."
)

_ID = r"(?P<id>[A-Za-z0-9_\-]{1,64})"
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(?:help|\?|what can you do\??)$", re.I), "help"),
    (re.compile(r"^(?:add|create|new)(?:\s+(?:a\s+)?task)?:?\s+(?P<rest>.+)$", re.I | re.S), "add"),
    (
        re.compile(
            r"^(?:list|show)(?:\s+(?:all|my))?(?:\s+(?P<status>pending|in[_ ]progress|open|done|completed))?"
            r"(?:\s+tasks?)?$",
            re.I,
        ),
        "list",
    ),
    (re.compile(r"^(?:search|find)(?:\s+for)?\s+(?P<text>.+)$", re.I | re.S), "search"),
    (re.compile(r"^(?:done|complete|finish|mark)\s+" + _ID + r"(?:\s+(?:as\s+)?done)?$", re.I), "done"),
    (re.compile(r"^start\s+" + _ID + r"$", re.I), "start"),
    (re.compile(r"^(?:delete|remove)(?:\s+task)?\s+" + _ID + r"$", re.I), "delete"),
    (
        re.compile(r"^attach\s+(?P<url>\S+)\s+to\s+" + _ID + r"(?:\s+as\s+(?P<title>.+))?$", re.I | re.S),
        "attach",
    ),
    (re.compile(r"^(?:attachments|links)(?:\s+(?:of|for))?\s+" + _ID + r"$", re.I), "attachments"),
    (re.compile(r"^detach\s+" + _ID + r"$", re.I), "detach"),
    (re.compile(r"^refresh\s+" + _ID + r"$", re.I), "refresh"),
]
_PRIORITY = re.compile(r"(?:^|\s)!(low|medium|high|critical)\b", re.I)
_PRIORITY_WORDS = re.compile(r"(?:^|\s)(?:priority|prio)\s+(low|medium|high|critical)\b", re.I)
_DUE = re.compile(r"(?:^|\s)due\s+(\S+)", re.I)
_TAG = re.compile(r"(?:^|\s)#([\w\-]{1,64})", re.U)


def _date(word: str, today: datetime) -> str:
    lowered = word.lower()
    if lowered == "today":
        return today.date().isoformat()
    if lowered == "tomorrow":
        return (today + timedelta(days=1)).date().isoformat()
    return word


def parse_command(text: str, *, now: datetime | None = None) -> ToolCall | str:
    """The tool call a message asks for, or the reply text when it is not a command."""
    message = " ".join(text.strip().split()) if "\n" not in text else text.strip()
    today = now or datetime.now(UTC)
    for pattern, kind in _PATTERNS:
        m = pattern.match(message)
        if m is None:
            continue
        if kind == "help":
            return DEMO_HELP
        if kind == "add":
            rest = m["rest"]
            args: dict[str, Any] = {}
            if p := _PRIORITY.search(rest) or _PRIORITY_WORDS.search(rest):
                args["priority"] = p.group(1).lower()
            if d := _DUE.search(rest):
                args["eta"] = _date(d.group(1), today)
            tags = _TAG.findall(rest)
            if tags:
                args["tags"] = tags
            title = _TAG.sub(" ", _DUE.sub(" ", _PRIORITY_WORDS.sub(" ", _PRIORITY.sub(" ", rest))))
            return ToolCall(name="create_task", arguments={"title": " ".join(title.split()), **args})
        if kind == "list":
            status = (m["status"] or "").lower().replace(" ", "_")
            status = {"open": "pending", "completed": "done"}.get(status, status)
            filters = {"status": status} if status else {}
            return ToolCall(name="query_tasks", arguments={"filters": filters})
        if kind == "search":
            return ToolCall(name="query_tasks", arguments={"filters": {"text": m["text"]}})
        if kind in ("done", "start"):
            status = "done" if kind == "done" else "in_progress"
            return ToolCall(name="set_task_status", arguments={"task_id": m["id"], "status": status})
        if kind == "delete":
            return ToolCall(name="delete_task", arguments={"task_id": m["id"]})
        if kind == "attach":
            args = {"task_id": m["id"], "url": m["url"]}
            if m["title"]:
                args["title"] = m["title"].strip()
            return ToolCall(name="add_attachment", arguments=args)
        if kind == "attachments":
            return ToolCall(name="list_attachments", arguments={"task_id": m["id"]})
        if kind == "detach":
            return ToolCall(name="delete_attachment", arguments={"attachment_id": m["id"]})
        return ToolCall(name="refresh_attachment", arguments={"attachment_id": m["id"]})
    return "I did not understand that. " + DEMO_HELP


def _task_line(task: dict[str, Any]) -> str:
    parts = [f"{task.get('id')}: {task.get('title', '')}"]
    extras = [str(task.get("status", "")), str(task.get("priority", ""))]
    if task.get("eta"):
        extras.append(f"due {task['eta'][:10]}")
    if task.get("tags"):
        extras.append(" ".join("#" + t for t in task["tags"]))
    return parts[0] + " (" + ", ".join(e for e in extras if e) + ")"


def demo_reply(tool_name: str, content: str, is_error: bool) -> str:
    """The demo model's answer to one tool result."""
    if is_error:
        if "CONFIRMATION_DENIED" in content:
            return "OK, I did not do it."
        return f"That did not work. {content}"
    try:
        value = json.loads(content)
    except ValueError:
        return content
    if not isinstance(value, dict):
        return content
    if tool_name == "create_task":
        return "Created " + _task_line(value) + "."
    if tool_name in ("update_task", "set_task_status"):
        return "Updated " + _task_line(value) + "."
    if tool_name == "delete_task":
        return f"Deleted task {value.get('deleted')} ({value.get('title', '')})."
    if tool_name == "query_tasks":
        tasks = value.get("tasks") or []
        if not tasks:
            return "No tasks match."
        head = f"{value.get('total', len(tasks))} task(s):"
        return "\n".join([head, *("- " + _task_line(t) for t in tasks)])
    if tool_name == "list_attachments":
        atts = value.get("attachments") or []
        if not atts:
            return f"Task {value.get('task_id')} has no attachments."
        return "\n".join(
            [f"Attachments of {value.get('task_id')}:"]
            + [f"- {a['id']}: {a['url']}" + (f" ({a['state']})" if a.get("state") else "") for a in atts]
        )
    if tool_name == "add_attachment":
        return f"Attached {value.get('url')} to {value.get('task_id')} as {value.get('id')}."
    if tool_name == "delete_attachment":
        return f"Removed attachment {value.get('deleted')}."
    if tool_name == "refresh_attachment":
        return (
            f"{value.get('url')}: {value.get('title') or 'untitled'} is {value.get('state') or 'unknown'}"
            f" (updated {value.get('remote_updated_at') or 'unknown'})."
        )
    return content


def _answer(messages: list[Message], tools: list[Tool]) -> ModelResponse:
    # Results of the calls made since the last user message: answer from them.
    results: list[ToolResultMessage] = []
    for message in reversed(messages):
        if isinstance(message, ToolResultMessage):
            results.append(message)
        elif (
            isinstance(message, UserMessage | AssistantMessage)
            and not (isinstance(message, AssistantMessage) and message.tool_calls)
        ) or isinstance(message, AssistantMessage):
            break
    if results:
        return ModelResponse(
            text="\n".join(demo_reply(r.tool_name, r.content, r.is_error) for r in reversed(results))
        )
    last_user = next((m for m in reversed(messages) if isinstance(m, UserMessage)), None)
    if last_user is None:
        return ModelResponse(text=DEMO_HELP)
    command = parse_command(last_user.content)
    if isinstance(command, str):
        return ModelResponse(text=command)
    names = {t.name for t in tools}
    if command.name not in names:
        return ModelResponse(text=f"The tool {command.name} is not available to you.")
    return ModelResponse(tool_calls=[command])


def create_demo_model() -> FunctionModel:
    """The demo model (`TOOLRUN_MODEL=demo`): deterministic, offline, named `demo`."""
    return FunctionModel(_answer, name="demo", max_recorded=1)

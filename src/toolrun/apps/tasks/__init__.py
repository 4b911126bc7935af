"""The task assistant (`app`, an `App` served by default): tasks and attachments per user, a consolidated
query tool, GitHub refresh, its `/api/v1/tasks` router and its own migrations.

```python
from toolrun.apps.tasks import TaskStore, task_tools

store = TaskStore(engine)                       # the service's SQLAlchemy AsyncEngine
registry = ToolRegistry(task_tools(store))      # create_task, set_task_status, update_task, ...
```

Every tool reads the user from its `ToolContext` and sees only that user's rows. `create_demo_model()` is
the offline model (`TOOLRUN_MODEL=demo`) that understands a small grammar for these tools.
"""

from toolrun.apps.tasks._app import app
from toolrun.apps.tasks._demo import DEMO_HELP, create_demo_model, parse_command
from toolrun.apps.tasks._github import GitHubClient, GitHubRef, parse_github_url
from toolrun.apps.tasks._store import PRIORITIES, STATUSES, Attachment, Task, TaskQuery, TaskStore
from toolrun.apps.tasks._tools import TaskFilters, parse_eta, task_tools

__all__ = [
    "DEMO_HELP",
    "PRIORITIES",
    "STATUSES",
    "Attachment",
    "GitHubClient",
    "GitHubRef",
    "Task",
    "TaskFilters",
    "TaskQuery",
    "TaskStore",
    "app",
    "create_demo_model",
    "parse_command",
    "parse_eta",
    "parse_github_url",
    "task_tools",
]

"""Planning tools with plans kept in session state, planning strategies, and the planning prompt section.

```python
from toolrun import Agent
from toolrun.planning import Plan, Session, planning_section
from toolrun.prompts import Prompt, Section

prompt = Prompt([Section("Role", "You help with research.", "role"), planning_section("plan_act_reflect")])
agent = Agent(model, prompt=prompt)        # the model gets the planning tools; the plan is re-rendered
run = await agent.run("Compare three databases")
Session(run.state)[Plan].latest()           # the plan the model made (also in run.to_json())
```

See docs/planning.md for the rules of the tools.
"""

from toolrun.planning._plan import Plan, PlanStatus, PlanStep, StepStatus
from toolrun.planning._section import STRATEGIES, Strategy, planning_section, render_current_plan
from toolrun.planning._session import Channel, Kind, Session, register_kind
from toolrun.planning._tools import planning_tools

__all__ = [
    "STRATEGIES",
    "Channel",
    "Kind",
    "Plan",
    "PlanStatus",
    "PlanStep",
    "Session",
    "StepStatus",
    "Strategy",
    "planning_section",
    "planning_tools",
    "register_kind",
    "render_current_plan",
]

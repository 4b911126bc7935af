"""Approvals: how a person decides on a call held for confirmation.

```python
from toolrun.approvals import Approve, Deny

await agent.resume(run, approvals={cid: True})                            # or Approve()
await agent.resume(run, approvals={cid: Approve(arguments={"to": "b"})})  # edited, then approved
await agent.resume(run, approvals={cid: Deny(reason="not today")})        # or False
await agent.decide(cid, True, context=ctx)      # from any process: the run from its store (Agent(runs=...))
```

This package is the concept's home: the decision grammar (`Approve`, `Deny`, the one check of a decision and
its JSON form), the preview a person approves, standing approval rules and what an edit changed. It sits
below `toolrun.runtime` and `toolrun.agent`, which hold the pending record (`ToolExecutor.approve`, `deny`,
`preview_edit`) and the paused run, so every door decides through the same code.
"""

from toolrun.approvals._decisions import Approve, Decision, Deny, InvalidDecisionError

__all__ = ["Approve", "Decision", "Deny", "InvalidDecisionError"]

"""CPU of `load_history` without the database (issue 21): a 32-message history's rows decoded, shown
(`message_view`), rebuilt (`message_from_dict`) and checked (`history_problems`), as every turn does.

The history repeats user / assistant with one tool call / tool result / assistant text. Prints µs per
history for each step and the whole, best of five rounds of 2000. Run it against two checkouts in turn:

    PYTHONPATH=src python bench/history_decode.py
    PYTHONPATH=../main/src python bench/history_decode.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from toolrun.models import history_problems
from toolrun.models._messages import message_from_dict
from toolrun.server._statements import decode_row
from toolrun.server._views import message_view


def rows(rounds: int = 8) -> list[tuple[int, str, bytes]]:
    out: list[tuple[int, str, bytes]] = []
    for k in range(rounds):
        call_id = f"call_{k:024d}"
        for message in (
            {"role": "user", "content": f"What is the weather in city number {k}?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "name": "get_weather",
                        "arguments": json.dumps({"city": f"City {k}", "units": "metric", "days": 3}),
                    }
                ],
            },
            {
                "role": "tool",
                "call_id": call_id,
                "tool_name": "get_weather",
                "content": json.dumps({"temp": 21.5, "sky": "clear", "wind": {"speed": 3, "dir": "NW"}}),
                "is_error": False,
            },
            {"role": "assistant", "content": f"In City {k} it is 21.5 degrees and clear, with a light wind."},
        ):
            out.append((len(out) + 1, "run_x", json.dumps(message).encode()))
    return out


def best_us(fn: Callable[[], Any], number: int = 2000, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def main() -> None:
    rs = rows()
    decoded = [decode_row(data) for _, _, data in rs]
    stored = [message_from_dict(d) for d in decoded]
    assert not history_problems(stored, open_tail=True)

    def whole() -> None:  # load_history's loop, as it is
        views, messages = [], []
        for seq, run_id, data in rs:
            d = decode_row(data)
            views.append(message_view(seq, run_id, d))
            messages.append(message_from_dict(d))
        history_problems(messages, open_tail=True)

    figures = {
        "decode": best_us(lambda: [decode_row(data) for _, _, data in rs]),
        "views": best_us(lambda: [message_view(s, r, d) for (s, r, _), d in zip(rs, decoded, strict=True)]),
        "message_from_dict": best_us(lambda: [message_from_dict(d) for d in decoded]),
        "history_problems": best_us(lambda: history_problems(stored, open_tail=True)),
        "whole": best_us(whole),
    }
    import toolrun

    print(toolrun.__file__, sys.version.split()[0])
    print(f"{len(rs)} messages: " + ", ".join(f"{k} {v:.1f} µs" for k, v in figures.items()))


if __name__ == "__main__":
    main()

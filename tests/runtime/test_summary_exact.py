"""`summarize_call`, exactly: what the person approving reads (pinned by mutation testing)."""

from __future__ import annotations

from toolrun import tool
from toolrun.runtime._stages import MAX_SHOWN_TOTAL, MAX_SHOWN_VALUE, _fold, summarize_call


@tool(destructive=True)
def wipe(target: str, force: bool = False) -> str:
    """Wipe a disk. Nothing can be recovered.

    Second paragraph.
    """
    return target


@tool(destructive=True, description=". Starts with a full stop.")
def bare(x: str) -> str:
    return x


def test_a_short_call_is_one_line_with_the_first_sentence() -> None:
    assert summarize_call(wipe, {"target": "d1", "force": True}) == (
        'wipe(target="d1", force=true) — Wipe a disk'
    )
    assert summarize_call(bare, {"x": "1"}) == 'bare(x="1")'


def test_a_line_of_exactly_160_characters_stays_one_line_and_161_does_not() -> None:
    fixed = len('wipe(target="", force=false)')
    at = summarize_call(wipe, {"target": "a" * (160 - fixed), "force": False})
    assert "\n" not in at and at.endswith(" — Wipe a disk")
    over = summarize_call(wipe, {"target": "a" * (161 - fixed), "force": False})
    assert over.startswith("wipe — Wipe a disk\n  target: ") and over.endswith("\n  force: false")


def test_long_values_fold_at_100_characters_and_hidden_ones_are_counted() -> None:
    text = summarize_call(wipe, {"target": "b" * 250, "force": False})
    lines = text.split("\n")
    assert lines[0] == "wipe — Wipe a disk"
    assert lines[1] == '  target: "' + "b" * 89 and len(lines[1]) == 100
    assert all(line.startswith("    ") and len(line) <= 100 for line in lines[2:-1])
    assert "".join(line.strip() for line in lines[1:-1]).endswith('b"')
    huge = summarize_call(wipe, {"target": "c" * MAX_SHOWN_VALUE, "force": True})
    assert f"  target: (not shown: {MAX_SHOWN_VALUE + 2:,} characters, too long to show here)" in huge
    assert huge.endswith(
        "1 value(s) are too long to show in this summary: look at the full arguments before you approve."
    )
    exactly = summarize_call(wipe, {"target": "c" * (MAX_SHOWN_VALUE - 2)})  # 4,000 with the quotes
    assert "not shown" not in exactly


def test_past_the_total_budget_further_long_values_are_not_shown() -> None:
    @tool(destructive=True)
    def many(a: str, b: str, c: str, d: str, e: str, f: str) -> str:
        """Many."""
        return a

    value = "x" * (MAX_SHOWN_VALUE - 2)  # 4,000 characters shown each
    text = summarize_call(many, dict.fromkeys("abcdef", value))
    assert text.count("not shown") == 2 and "2 value(s) are too long" in text  # 4 x 4,000 = the budget
    assert MAX_SHOWN_TOTAL == 16_000


def test_invisible_characters_are_escaped_by_their_code_point() -> None:
    assert summarize_call(bare, {"x": "\U000e0001"}) == 'bare(x="\\U000e0001")'  # above U+FFFF
    assert summarize_call(bare, {"x": "\uffff"}) == 'bare(x="\\uffff")'  # the last four-digit one
    assert summarize_call(bare, {"x": "a\u202eb"}) == 'bare(x="a\\u202eb")'


def test_folding_never_splits_an_escape_and_counts_it_whole() -> None:
    assert _fold("ab\\u200bcd", 8, 8) == ["ab\\u200b", "cd"]
    assert _fold("ab\\U000e0001cd", 12, 12) == ["ab\\U000e0001", "cd"]
    assert _fold("abcdef\\nxy", 8, 8) == ["abcdef\\n", "xy"]
    assert _fold("abcdefg\\nxy", 8, 8) == ["abcdefg", "\\nxy"]


def test_continuation_lines_are_exactly_100_characters() -> None:
    text = summarize_call(wipe, {"target": "b" * 300, "force": False})
    lines = text.split("\n")
    assert lines[2] == "    " + "b" * 96


def test_only_the_first_sentence_of_the_first_line_describes_the_tool() -> None:
    @tool(destructive=True, description="First line\nsecond line\nthird line")
    def lines(x: str) -> str:
        return x

    @tool(destructive=True, description="One. Two. Three.")
    def sentences(x: str) -> str:
        return x

    @tool(destructive=True, description="Empty the BOX.")
    def box(x: str) -> str:
        return x

    @tool(destructive=True, description="d" * 170)
    def long(x: str) -> str:
        return x

    assert summarize_call(lines, {"x": "1"}) == 'lines(x="1") — First line'
    assert summarize_call(sentences, {"x": "1"}) == 'sentences(x="1") — One'
    assert summarize_call(box, {"x": "1"}) == 'box(x="1") — Empty the BOX'
    assert summarize_call(long, {"x": "1"}) == 'long(x="1") — ' + "d" * 160


def test_the_hidden_count_line_is_exact() -> None:
    huge = summarize_call(wipe, {"target": "c" * MAX_SHOWN_VALUE, "force": True})
    assert huge.split("\n")[-1] == (
        "1 value(s) are too long to show in this summary: look at the full arguments before you approve."
    )


def test_past_the_budget_a_value_of_200_characters_is_still_shown() -> None:
    @tool(destructive=True)
    def five(a: str, b: str, c: str, d: str, e: str) -> str:
        """Five."""
        return a

    value = "x" * (MAX_SHOWN_VALUE - 2)
    text = summarize_call(five, {"a": value, "b": value, "c": value, "d": value, "e": "y" * 198})
    assert "not shown" not in text and '\n  e: "yyy' in text
    text = summarize_call(five, {"a": value, "b": value, "c": value, "d": value, "e": "y" * 199})
    assert "  e: (not shown: 201 characters, too long to show here)" in text

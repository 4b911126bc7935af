"""Tool search: `ToolSet.search` / `ToolIndex`, and its recall on the BFCL corpus (with a pinned floor)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import toolrun.search
from toolrun import Tool, ToolRegistry, tool
from toolrun.search import ToolIndex, query_terms, split_name

BENCH = Path(__file__).resolve().parents[1] / "bench" / "search.py"


@tool
def get_weather_forecast(city: str, days: int = 3) -> dict[str, Any]:
    """Forecast for a city over the next days."""
    return {}


@tool
def convertCurrency(amount: float, source: str, target: str) -> float:  # camelCase on purpose
    """Change money from one denomination into another.

    Args:
        amount: How much.
        source: ISO code of the currency held, e.g. EUR.
        target: ISO code wanted, e.g. USD.
    """
    return amount


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send a message to someone's inbox."""
    return "sent"


@tool
def book_table(restaurant: str, people: int, cuisine: str = "any") -> str:
    """Reserve at a place to eat.

    Args:
        restaurant: Where.
        people: How many guests.
        cuisine: Kind of food, one of italian, thai, vegan.
    """
    return "booked"


@pytest.fixture(autouse=True, params=["bm25s", "fts5"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both engines (what `engine="auto"` picks is set to each in turn)."""
    chosen: str = request.param
    monkeypatch.setattr(toolrun.search, "_engine", lambda name: chosen if name == "auto" else name)
    return chosen


def registry() -> ToolRegistry:
    return ToolRegistry([get_weather_forecast, convertCurrency, send_email, book_table])


def names(tools: list[Tool]) -> list[str]:
    return [t.name for t in tools]


def test_names_are_split_into_words() -> None:
    assert split_name("get_weatherForecast.v2") == "get weather Forecast v2"
    assert split_name("HTTPServerStatus") == "HTTP Server Status"
    assert query_terms("What's the WeatherForecast for Paris in 3 days?") == [
        "s",
        "weather",
        "forecast",
        "paris",
        "days",
    ]


def test_search_matches_names_descriptions_and_parameters() -> None:
    reg = registry()
    assert names(reg.search("weather forecast for Lyon", 1)) == ["get_weather_forecast"]  # snake_case name
    assert names(reg.search("convert 20 currency", 1)) == ["convertCurrency"]  # camelCase name
    assert names(reg.search("inbox message", 1)) == ["send_email"]  # description only
    assert names(reg.search("USD", 1)) == ["convertCurrency"]  # a parameter's description
    assert names(reg.search("vegan dinner for 4 guests", 1)) == ["book_table"]  # enum-ish text + params
    assert names(reg.search("forecasting", 1)) == ["get_weather_forecast"]  # stemming


def test_k_order_and_no_match() -> None:
    reg = registry()
    assert len(reg.search("send money email weather", 2)) == 2
    # Fewer than k when fewer share a word with the query (book_table shares none).
    assert names(reg.search("send money email weather", 10)) == [
        "send_email",
        "get_weather_forecast",
        "convertCurrency",
    ]
    assert reg.search("the of and", 5) == []  # only stop words
    assert reg.search("", 5) == []
    assert reg.search("zebra quantum", 5) == []
    with pytest.raises(ValueError, match="k must be"):
        reg.search("x", 0)


def test_query_syntax_cannot_be_injected() -> None:
    reg = registry()
    for query in ['"weather', "NEAR(weather", "weather OR *", "name:weather", "-weather ^forecast"]:
        assert names(reg.search(query, 1)) == ["get_weather_forecast"]


def test_the_index_follows_registry_changes_and_views() -> None:
    reg = registry()
    assert names(reg.search("translate text", 1)) == []

    @tool
    def translate(text: str, language: str) -> str:
        """Translate text into a language."""
        return text

    reg.register(translate)
    assert names(reg.search("translate text", 1)) == ["translate"]
    reg.unregister("translate")
    assert names(reg.search("translate text", 1)) == []
    view = reg.filter(deny=["send_email"])
    assert names(view.search("message inbox email", 5)) == []
    assert names(reg.prefixed("crm").search("inbox message", 1)) == ["crm_send_email"]


def test_search_is_thread_safe() -> None:
    reg = registry()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(200):
                assert names(reg.search("weather forecast", 1)) == ["get_weather_forecast"]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_tool_index_returns_one_hit_per_name_best_first() -> None:
    @tool(name="get_weather_forecast")
    def other_forecast(city: str) -> str:
        """Weather forecast, weather history, weather maps."""
        return city

    index = ToolIndex([get_weather_forecast, send_email, other_forecast])
    hits = index.search("weather maps", 5)
    assert [h.tool.name for h in hits] == ["get_weather_forecast"]
    assert hits[0].tool is other_forecast  # the better-matching doc of that name
    hits = index.search("weather inbox", 5)
    assert [h.tool.name for h in hits] == ["send_email", "get_weather_forecast"]
    assert hits[0].score >= hits[1].score > 0


def test_searching_a_closed_index_is_a_clear_error() -> None:
    index = ToolIndex([get_weather_forecast, send_email])
    assert index.search("weather", 1)
    index.close()
    with pytest.raises(RuntimeError, match="closed"):
        index.search("weather", 1)


def test_a_query_of_several_sentences_gets_tools_for_each() -> None:
    tools = [
        Tool.from_schema(f"weather_{kind}", f"Weather {kind} for a city.", {"type": "object"})
        for kind in ("forecast", "alerts", "maps", "history")
    ]
    index = ToolIndex([*tools, Tool.from_schema("send_email", "Send a message to someone's inbox.")])
    # As one sentence, the weather words outnumber the mail ones: the top 2 are both weather tools.
    one = "Weather forecast and weather alerts for the city of Lyon, and a message for Bob."
    assert [h.tool.name for h in index.search(one, 2)] == ["weather_forecast", "weather_alerts"]
    # As two sentences, each request gets its best tool near the top.
    two = "Weather forecast and weather alerts for the city of Lyon. And a message for Bob."
    assert [h.tool.name for h in index.search(two, 2)] == ["weather_forecast", "send_email"]


def test_engines_by_name_and_the_fallback(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = [get_weather_forecast, send_email]
    assert ToolIndex(tools, engine="fts5").engine == "fts5"
    assert ToolIndex(tools, engine="bm25s").engine == "bm25s"
    assert ToolIndex([], engine="bm25s").search("weather", 5) == []  # bm25s cannot index nothing: no call
    with pytest.raises(ValueError, match="Unknown search engine"):
        ToolIndex(tools, engine="whoosh")  # type: ignore[arg-type]
    monkeypatch.undo()  # the real choice: bm25s when it imports, FTS5 when it does not
    assert ToolIndex(tools).engine == "bm25s"
    monkeypatch.setitem(sys.modules, "bm25s", None)  # as if the search extra were not installed
    index = ToolIndex(tools)
    assert index.engine == "fts5"
    assert [h.tool.name for h in index.search("weather forecast", 1)] == ["get_weather_forecast"]


def test_a_weak_sentence_gets_no_place_of_its_own() -> None:
    tools = [
        Tool.from_schema("weather_forecast", "Weather forecast for a city.", {"type": "object"}),
        Tool.from_schema("weather_alerts", "Weather alerts for a city.", {"type": "object"}),
        Tool.from_schema("send_email", "Send an email message to someone's inbox.", {"type": "object"}),
        Tool.from_schema(
            "open_ticket",
            "Open a ticket.",
            {"type": "object", "properties": {"queue": {"type": "string", "description": "Which desk."}}},
        ),
    ]
    index = ToolIndex(tools)
    # The first sentence shares one word ("desk") with one parameter's description; the two asks match
    # several words each, names included. Without the rule, round-robin gives open_ticket third place.
    query = "Could you help me at my desk? Weather forecast and weather alerts for Lyon. Send email to Bob."
    top = [h.tool.name for h in index.search(query, 3)]
    assert top == ["send_email", "weather_forecast", "weather_alerts"]


def test_a_first_sentence_that_asks_for_help_gets_no_place_of_its_own() -> None:
    tools = [
        Tool.from_schema(name, description, {"type": "object"})
        for name, description in (
            ("generate_architecture_plan", "Generate a custom architecture plan for a building."),
            ("hotel_room_pricing", "Get the price of a hotel room for some nights."),
            ("car_rental_pricing", "Get the price of a rental car for some days."),
            ("flight_ticket_pricing", "Get the price of a flight ticket."),
        )
    ]
    index = ToolIndex(tools)
    # "Could you help me plan my vacation?" only announces the requests; with a list of its own, "plan" gave
    # the architecture tool third place, ahead of the third pricing tool.
    query = (
        "Could you help me plan my vacation? What is the price of a hotel room in Paris for 3 nights? "
        "And the price of a rental car for 3 days?"
    )
    top = [h.tool.name for h in index.search(query, 3)]
    assert top == ["hotel_room_pricing", "car_rental_pricing", "flight_ticket_pricing"]
    # Its words still count in the whole question's list: a real request in it is still found.
    top = [h.tool.name for h in index.search("Can you help me plan a building? Price a hotel room.", 2)]
    assert sorted(top) == ["generate_architecture_plan", "hotel_room_pricing"]


def test_and_then_parts_the_requests_of_one_sentence() -> None:
    tools = [
        Tool.from_schema(f"weather_{kind}", f"Weather {kind} for a city.", {"type": "object"})
        for kind in ("forecast", "alerts", "maps", "history")
    ]
    index = ToolIndex([*tools, Tool.from_schema("send_email", "Send a message to someone's inbox.")])
    # One sentence, but "and then" starts another request: the mail tool gets a place beside the weather.
    one = "Weather forecast and weather alerts for the city of Lyon, and then a message for Bob."
    assert [h.tool.name for h in index.search(one, 2)] == ["weather_forecast", "send_email"]


def test_a_request_asked_twice_takes_no_more_places() -> None:
    tools = [
        Tool.from_schema(name, description, {"type": "object"})
        for name, description in (
            ("triangle_area", "Calculate the area of a triangle from its base and height."),
            ("triangle_area_heron", "Calculate the area of a triangle from its three sides."),
            ("unit_converter", "Convert a value between units such as square meters and square feet."),
            ("t_test", "Perform a t-test on two datasets."),
            ("concert_finder", "Find rock concerts in a city."),
            ("event_finder", "Find upcoming events in a city, rock concerts included."),
        )
    ]
    index = ToolIndex(tools)
    # The last sentence asks for a triangle's area again (its best tool is the first sentence's): its
    # runner-up (the unit converter, for "square meters") took fifth place from the concerts' runner-up.
    query = (
        "Calculate the area of a triangle with base 3 and height 4. Compare two datasets with a t-test. Find "
        "rock concerts in Boston. Lastly, the area of a triangle with base 5 and height 6 in square meters."
    )
    top = [h.tool.name for h in index.search(query, 5)]
    assert top == ["t_test", "triangle_area", "concert_finder", "triangle_area_heron", "event_finder"]


def test_feedback_moves_up_the_tools_like_the_best_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """bm25s's pseudo-relevance feedback (RM3): the best tools' other words are searched too, a little, in the
    tools that share a word with the query; a tool that shares none stays out."""
    money = [
        Tool.from_schema("money_convert", "Convert money between currencies at the exchange rate."),
        Tool.from_schema(
            "currency_money", "Money in one currency converted to another at the exchange rate."
        ),
        Tool.from_schema("money_exchange", "Exchange money into other currencies at the rate of the day."),
    ]
    others = [
        Tool.from_schema("unit_convert", "Convert units of length."),
        Tool.from_schema("fx_convert", "Convert exchange rates."),  # as long, and like the money tools
        Tool.from_schema("fx_history", "History of exchange rates of currencies."),  # no query word
        *(Tool.from_schema(f"{w}_guide", f"{w.title()} for a city.") for w in ("weather", "news", "parks")),
    ]

    def top() -> dict[str, float]:
        hits = ToolIndex([*money, *others], engine="bm25s").search("convert money", 10)
        return {h.tool.name: h.score for h in hits}

    with_feedback = top()
    assert list(with_feedback) == [
        "money_convert",
        "currency_money",
        "money_exchange",
        "fx_convert",
        "unit_convert",
    ]
    monkeypatch.setattr(toolrun.search, "FEEDBACK_DOCS", 0)
    without = top()
    assert list(without)[:3] == list(with_feedback)[:3] and len(without) == 5
    assert without["fx_convert"] == pytest.approx(without["unit_convert"])  # one query word each, same length


def test_a_currency_or_a_unit_finds_the_tools_that_say_currency_or_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bm25s's lexicon (`SYNONYMS`): "100 euro in USD" shares no word with a currency converter's doc; a
    currency's name also searches "currency", a unit's "unit", at `SYNONYM_WEIGHT`, below the query's own
    words."""
    tools = [
        Tool.from_schema(
            "currency_conversion",
            "Convert a value from one currency to another.",
            {"type": "object", "properties": {"amount": {}, "from_currency": {}, "to_currency": {}}},
        ),
        Tool.from_schema(
            "unit_conversion",
            "Convert a value from one unit to another.",
            {"type": "object", "properties": {"value": {}, "from_unit": {}, "to_unit": {}}},
        ),
        Tool.from_schema("euro_cup_results", "Results of a match of the Euro football championship."),
        Tool.from_schema("hiking_trails", "Find hiking trails longer than a number of miles near a city."),
        Tool.from_schema("currency_history", "History of a currency since its creation."),
    ]

    def top(query: str) -> list[str]:
        return [h.tool.name for h in ToolIndex(tools, engine="bm25s").search(query, 3)]

    assert top("100 euro in USD")[0] == "currency_conversion"  # a value in another of its kind: convert
    assert top("how many km are 26 miles") == ["unit_conversion", "hiking_trails"]
    assert top("convert 20 pounds to yen")[0] == "currency_conversion"  # pounds and yen: both currencies
    assert top("weigh 10 lbs in kg")[0] == "unit_conversion"  # pounds and kilograms: both units
    assert top("Euro championship results")[0] == "euro_cup_results"  # not a value: the word weighs most
    without_lexicon(monkeypatch)  # the words alone decide
    assert top("100 euro in USD") == ["euro_cup_results"]
    assert top("how many km are 26 miles") == ["hiking_trails"]


def test_values_conversions_and_derived_forms() -> None:
    """The parts of the lexicon rules: currencies and units written after a number are values; a value in
    another of its kind asks for a conversion; derived forms the stemmer leaves apart are searched too."""
    analyse = toolrun.search._analyse
    assert analyse("Convert 100 euros and 5,000.50 Japanese yen; 3 cups of flour")[1] == {
        "euros",
        "yen",
        "cups",
    }
    assert analyse("the euro in 2024, 3 apples")[1] == frozenset()
    assert analyse("What is 100 EUR in USD?") == (["eur", "usd", "convert", "currency"], {"eur"})
    assert analyse("26 miles to km")[0] == ["miles", "km", "convert", "unit"]
    assert analyse("convert 75 kilograms into pounds")[0] == ["convert", "kilograms", "pounds", "unit"]
    assert analyse("20 pounds to yen")[0] == ["pounds", "yen", "convert", "currency"]
    assert analyse("a trip to Paris in euros")[0] == ["trip", "paris", "euros"]
    assert analyse("dollars to dollars")[0] == ["dollars"]
    assert "convert" in toolrun.search._derived("conversion")
    assert "conversion" in toolrun.search._derived("convert")
    assert "solution" in toolrun.search._derived("solve")
    assert "multiply" in toolrun.search._derived("multiplication")
    assert "pay" in toolrun.search._derived("payment")
    assert toolrun.search._derived("pay") == []  # no empty suffix the other way ("payment" from "pay")


def test_a_derived_form_finds_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snowball stems "conversion" to "convers" and "convert" to "convert": the query's derived forms
    (`_DERIVATIONS`) are searched at `DERIVED_WEIGHT`."""
    tools = [
        Tool.from_schema("convert_document", "Convert a document to another format."),
        Tool.from_schema("solve_equation", "Solve an equation for x."),
        Tool.from_schema("send_email", "Send an email message."),
    ]

    def top(query: str) -> list[str]:
        return [h.tool.name for h in ToolIndex(tools, engine="bm25s").search(query, 3)]

    assert top("conversion") == ["convert_document"]
    assert top("solution") == ["solve_equation"]
    monkeypatch.setattr(toolrun.search, "DERIVED_WEIGHT", 0.0)
    assert top("conversion") == []
    assert top("solution") == []


def test_feedback_words_weigh_a_share_of_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """The expansion words together weigh FEEDBACK_WEIGHT × the query's stem count, the query's own stems
    left out: here "gamma", the one word of the matching tools that the query lacks, gets all of it."""
    tools = [
        Tool.from_schema("alpha_beta", "Alpha beta gamma."),
        Tool.from_schema("alpha_gamma", "Alpha gamma."),
        Tool.from_schema("gamma_delta", "Gamma delta."),
    ]
    hits = {h.tool.name: h.score for h in ToolIndex(tools, engine="bm25s").search("alpha beta", 5)}
    monkeypatch.setattr(toolrun.search, "FEEDBACK_DOCS", 0)
    index = ToolIndex(tools, engine="bm25s")

    def plain(query: str) -> dict[str, float]:
        return {h.tool.name: h.score for h in index.search(query, 5)}

    assert set(hits) == {"alpha_beta", "alpha_gamma"}  # gamma_delta shares no word with the query
    weight = toolrun.search.FEEDBACK_WEIGHT * 2
    assert hits["alpha_beta"] == pytest.approx(
        plain("alpha beta")["alpha_beta"] + weight * plain("gamma")["alpha_beta"]
    )
    assert hits["alpha_gamma"] == pytest.approx(
        plain("alpha")["alpha_gamma"] + weight * plain("gamma")["alpha_gamma"]
    )


class FakeEmbedder:
    """Counts, per text, the words of each of three "concepts": a stand-in for a model that knows "exchange"
    is about converting currencies though no tool says "exchange"."""

    CONCEPTS = (
        {"convert", "currency", "exchange", "into"},
        {"history", "historical", "past", "old"},
        {"yen", "dollars", "dollar", "euro"},
    )

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        self.calls.append(list(texts))
        words = [re.findall(r"[a-z]+", text.lower()) for text in texts]
        return [[sum(w in concept for w in ws) for concept in self.CONCEPTS] for ws in words]


def money_tools() -> list[Tool]:
    amount = {"type": "number", "description": "How much, e.g. 100 dollars or yen."}
    return [
        Tool.from_schema(
            "currency_convert",
            "Convert an amount from one currency to another.",
            {"type": "object", "properties": {"amount": amount}},
        ),
        Tool.from_schema(
            "dollar_history",
            "History of the dollar against the yen: past events, historical records, old history.",
            {"type": "object"},
        ),
        Tool.from_schema("send_email", "Send an email message.", {"type": "object"}),
    ]


def without_lexicon(monkeypatch: pytest.MonkeyPatch) -> None:
    """The words alone: no lexicon, no value weighting, no conversion rule, no derived forms."""
    monkeypatch.setattr(toolrun.search, "SYNONYM_WEIGHT", 0.0)
    monkeypatch.setattr(toolrun.search, "VALUE_WEIGHT", 1.0)
    monkeypatch.setattr(toolrun.search, "DERIVED_WEIGHT", 0.0)
    monkeypatch.setattr(toolrun.search, "_LINKS", frozenset())  # no conversion rule


def test_an_embedding_function_reranks_by_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    without_lexicon(monkeypatch)  # (bm25s's lexicon would find it by words)
    tools = money_tools()
    query = "Exchange 5000 yen into dollars"
    # By words alone, the history tool shares more of them (in its description, not a parameter's).
    assert [h.tool.name for h in ToolIndex(tools).search(query, 3)] == ["dollar_history", "currency_convert"]
    embed = FakeEmbedder()
    index = ToolIndex(tools, embed=embed)
    assert len(embed.calls) == 1 and len(embed.calls[0]) == 3  # every tool's text, once
    assert embed.calls[0][0].startswith("currency convert Convert an amount")  # name words, description, ...
    hits = index.search(query, 3)
    assert [h.tool.name for h in hits] == ["currency_convert", "dollar_history"]  # still only word matches
    assert hits[0].score > hits[1].score
    assert embed.calls[1:] == [[query]]  # one call per search
    assert index.search("zebra quantum", 3) == []


def test_a_question_of_several_sentences_embeds_each(monkeypatch: pytest.MonkeyPatch) -> None:
    without_lexicon(monkeypatch)  # the sentence strengths below are by words
    embed = FakeEmbedder()
    index = ToolIndex(money_tools(), embed=embed)
    query = "Exchange 5000 yen into dollars at the currency rate. Then send an email to Bob."
    top = [h.tool.name for h in index.search(query, 3)]
    assert top == ["currency_convert", "send_email", "dollar_history"]
    # Each sentence that gets a place, once, strongest first; the whole question's vector is their mean.
    assert embed.calls[1:] == [
        ["Then send an email to Bob.", "Exchange 5000 yen into dollars at the currency rate."]
    ]
    # A sentence too weak to get a place (beside a mail sentence of four matching words) is not embedded;
    # with one sentence left, the whole question is embedded too.
    embed.calls.clear()
    query = "Exchange 5000 yen into dollars. Then send an email message to Bob."
    index.search(query, 3)
    assert embed.calls == [[query, "Then send an email message to Bob."]]


def test_an_embedding_function_must_return_one_vector_per_text() -> None:
    with pytest.raises(ValueError, match="one vector for each of 3 texts"):
        ToolIndex(money_tools(), embed=lambda texts: [[1.0, 0.0]])
    index = ToolIndex(money_tools(), embed=lambda texts: [[1.0, 0.0] for _ in texts])
    assert index.search("yen", 1)  # zero or equal vectors: the BM25 order stands
    embed = FakeEmbedder()
    assert ToolIndex([], embed=embed).search("yen", 1) == [] and embed.calls == []


def test_an_embedding_function_needs_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # as if numpy were not installed
    with pytest.raises(ImportError, match="needs numpy"):
        ToolIndex(money_tools(), engine="fts5", embed=FakeEmbedder())


def test_import_toolrun_does_not_import_sqlite() -> None:
    code = "import sys, toolrun; print('sqlite3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------------------
# BFCL: 1,917 function docs, 400 questions


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toolrun_bench_search", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


FLOORS = {
    # engine: (recall@5, recall@5 on the held-out half, recall@5 on `multiple`, recall@1)
    "bm25s": (0.91, 0.91, 0.93, 0.47),
    "fts5": (0.89, 0.91, 0.95, 0.45),
}
"""Just below what bench/search.py measured, over 696 (question, gold) pairs (bm25s with the lexicon's second
round, issue 23: 91.5 %, held-out half 91.8 %, recall@1 47.7 %; with its first: 91.2 %, 91.5 %, 47.6 %);
before the lexicon: bm25s recall@5 90.8 %
(held-out half 91.2 %, `multiple` 94.0 %, `parallel_multiple` 89.5 %), recall@1 47.4 %; FTS5 90.1 % (91.8 %,
95.5 %, 87.9 %), 46.1 %; the plain BM25 baseline over the same docs: 77.6 % (80.0 % held out) and 44.3 %."""


def test_the_bench_static_embedder_averages_token_vectors() -> None:
    """bench/search.py's `StaticEmbedder`, on a fake model2vec model (no model needed)."""
    import numpy as np  # the dev extra brings it (through bm25s): a missing numpy fails, never skips

    bench = load_bench()
    vocabulary = {"[UNK]": 0, "yen": 1, "dollar": 2, "##s": 3, "-": 4}

    class Encoding:
        def __init__(self, word: str) -> None:
            if word.endswith("s") and word[:-1] in vocabulary:
                self.ids = [vocabulary[word[:-1]], vocabulary["##s"]]
            else:
                self.ids = [vocabulary.get(word, 0)]

    class Tokenizer:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def get_vocab(self) -> dict[str, int]:
            return vocabulary

        def encode_batch_fast(self, words: list[str], add_special_tokens: bool) -> list[Encoding]:
            self.asked += words
            return [Encoding(w) for w in words]

    class Model:
        embedding = np.array([[9.0, 9], [1, 0], [0, 1], [0, 3], [5, 5]], dtype=np.float16)
        tokenizer = Tokenizer()
        unk_token_id = 0

    embed = bench.StaticEmbedder(Model())
    vectors = embed(["Yen-dollars", "zebra", ""])  # unknown words and empty texts: zero vectors
    assert vectors.tolist() == [[1.5, 2.25], [0.0, 0.0], [0.0, 0.0]]  # (1,0) + (5,5) + (0,1) + (0,3), / 4
    assert sorted(Model.tokenizer.asked) == ["dollars", "zebra"]  # "yen" and "-" are vocabulary words
    assert embed(["zebra yen"]).tolist() == [[1.0, 0.0]]
    assert sorted(Model.tokenizer.asked) == ["dollars", "zebra", "zebra"]  # not in the vocabulary: each time


@pytest.mark.slow
@pytest.mark.timeout(180)  # 1,917 lenient schemas and 400 searches; slow on a shared machine
def test_bfcl_recall_floor(engine: str) -> None:
    bench = load_bench()
    if not (bench.CORPUS / "BFCL_v4_multiple.json").is_file():
        pytest.fail(f"BFCL corpus not found at {bench.CORPUS} (see shared/corpora/README.md); no skip.")
    tools = bench.load_tools()
    queries = bench.load_queries()
    assert len(tools) == 1917 and len(queries) == 400
    result = bench.evaluate("toolrun", bench.toolrun_search(tools), queries)  # "auto": each engine in turn
    assert result.pairs == 696
    at_5, held_out, multiple, at_1 = FLOORS[engine]
    assert result.recall_at_5 >= at_5
    assert result.recall_at_5_held_out >= held_out
    assert result.by_category["multiple"] >= multiple
    assert result.recall_at_1 >= at_1

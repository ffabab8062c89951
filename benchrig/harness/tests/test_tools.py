"""The deterministic mock tools and the registry, called the way the loop calls them."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

from benchrig.harness.tools import TOOL_CLASSES, build_toolbox
from benchrig.harness.tools.base import ToolResult, World
from benchrig.harness.tools.fetch_url import PAGES
from benchrig.harness.tools.read_file import FILES
from benchrig.harness.tools.web_search import CORPUS, INDEX, NO_MATCH_PREFIX, tokenize

RTX_5090_URL = "https://gpuspecs.example.com/nvidia/geforce-rtx-5090"


def call(tool_name: str, world: World | None = None, **arguments: Any) -> ToolResult:
    tool = TOOL_CLASSES[tool_name](world or World())
    return asyncio.run(tool(arguments))


def first_url(search_output: str) -> str:
    match = re.search(r"https://\S+", search_output)
    assert match, search_output
    return match.group()


# --- registry ---------------------------------------------------------------------------------


def test_registry_has_all_seven_tools() -> None:
    assert set(TOOL_CLASSES) == {
        "web_search",
        "read_file",
        "calc",
        "execute_python",
        "send_message",
        "read_record",
        "fetch_url",
    }
    assert all(name == cls.name for name, cls in TOOL_CLASSES.items())


@pytest.mark.parametrize("name", sorted(TOOL_CLASSES))
def test_every_spec_is_an_openai_function_whose_required_args_are_declared(name: str) -> None:
    spec = TOOL_CLASSES[name](World()).spec()
    fn = spec["function"]
    assert spec["type"] == "function" and fn["name"] == name and fn["description"]
    assert fn["parameters"]["type"] == "object"
    assert set(fn["parameters"]["required"]) <= set(fn["parameters"]["properties"])


def test_build_toolbox_shares_the_world_and_keeps_order() -> None:
    world = World()
    box = build_toolbox(["send_message", "calc"], world)
    assert list(box) == ["send_message", "calc"]
    assert all(tool.world is world for tool in box.values())


def test_build_toolbox_rejects_unknown_names_clearly() -> None:
    with pytest.raises(KeyError, match=r"unknown tool\(s\) \['rm_rf'\].*known tools"):
        build_toolbox(["calc", "rm_rf"], World())


def test_missing_required_argument_is_an_error_result() -> None:
    result = call("calc")
    assert result.is_error and "expression" in result.content


# --- web_search -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "RTX 5090 specs VRAM GB",
        "rtx 5090 vram",
        "How much video memory does the GeForce RTX 5090 have?",
        "NVIDIA RTX-5090 memory size",
        "rtx5090 VRAM",
        "geforce rtx 5090 specifications",
    ],
)
def test_paraphrases_find_the_rtx_5090_spec_page_first(query: str) -> None:
    result = call("web_search", query=query)
    assert not result.is_error
    assert first_url(result.content) == RTX_5090_URL
    first_hit = result.content.split("\n\n")[0]
    assert "32 GB of GDDR7 VRAM" in first_hit


def test_paraphrases_give_the_same_top_page_as_each_other() -> None:
    queries = [
        "RTX 5090 specs VRAM GB",
        "rtx 5090 vram",
        "How much video memory does the 5090 have",
    ]
    tops = {INDEX.search(q)[0][1].url for q in queries}
    assert tops == {RTX_5090_URL}


@pytest.mark.parametrize(
    ("query", "url_part", "fact"),
    [
        ("RTX 4090 VRAM", "geforce-rtx-4090", "24 GB"),
        ("how much memory does the rtx 4090 have", "geforce-rtx-4090", "24 GB"),
        ("rtx 5090 price", "rtx-5090-launch-price", "$1,999"),
        ("ExampleCloud API rate limits documentation", "docs.examplecloud.dev", "Pro"),
        ("examplecloud rate limit docs", "docs.examplecloud.dev", "Pro"),
        ("how tall is mount everest", "Mount_Everest", "8,849"),
    ],
)
def test_other_queries_rank_the_right_page_first(query: str, url_part: str, fact: str) -> None:
    result = call("web_search", query=query)
    first_hit = result.content.split("\n\n")[0]
    assert url_part in first_url(result.content) and fact in first_hit


def test_results_are_capped_at_three_numbered_hits() -> None:
    result = call("web_search", query="nvidia geforce rtx gpu vram specifications").content
    assert [line[:2] for line in result.splitlines() if re.match(r"\d\. ", line)] == [
        "1.",
        "2.",
        "3.",
    ]


@pytest.mark.parametrize("query", ["xyz", "qwertyuiop zxcvb", "the of and what is", "?!", ""])
def test_no_meaningful_overlap_is_a_recognisable_no_match_not_an_error(query: str) -> None:
    result = call("web_search", query=query)
    assert not result.is_error
    assert result.content == f"{NO_MATCH_PREFIX} for {query!r}"
    assert result.content.startswith("no match")


def test_search_is_deterministic() -> None:
    outputs = {call("web_search", query="rtx vram").content for _ in range(3)}
    assert len(outputs) == 1


def test_tokenize_folds_case_punctuation_plurals_and_synonyms() -> None:
    assert tokenize("GPUs' Memory!") == tokenize("gpu vram") == ["gpu", "vram"]
    assert tokenize("RTX-5090") == tokenize("rtx5090") == ["rtx", "5090"]
    assert tokenize("How much is the") == []


def test_non_string_query_is_a_tool_error() -> None:
    result = call("web_search", query=["rtx"])
    assert result.is_error and "string" in result.content


# --- read_file --------------------------------------------------------------------------------


def test_read_file_returns_contents() -> None:
    result = call("read_file", path="/data/sales.csv")
    assert not result.is_error and result.content == FILES["/data/sales.csv"]
    assert result.content.startswith("date,region,product,units,unit_price\n")


@pytest.mark.parametrize(
    "path", ["data/sales.csv", " /data/./sales.csv ", "/notes/../data/sales.csv"]
)
def test_read_file_normalises_paths_like_a_shell_at_root(path: str) -> None:
    assert call("read_file", path=path).content == FILES["/data/sales.csv"]


def test_unknown_file_lists_its_directory() -> None:
    result = call("read_file", path="/data/sale.csv")
    assert result.is_error
    assert "no such file '/data/sale.csv'" in result.content and "/data/sales.csv" in result.content


def test_unknown_directory_lists_every_file() -> None:
    result = call("read_file", path="/etc/passwd")
    assert result.is_error and all(path in result.content for path in FILES)


def test_a_directory_path_lists_its_files() -> None:
    result = call("read_file", path="/notes")
    assert result.is_error and "is a directory" in result.content
    assert "/notes/todo.txt" in result.content and "/data/sales.csv" not in result.content


# --- calc -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("32^2", "34"),  # the reference finding's hazard: ^ is bitwise XOR
        ("32**2", "1024"),
        ("32*32", "1024"),
        ("pow(32, 2)", "1024"),
        ("2**10 / 1", "1024.0"),
        ("7/2", "3.5"),
        ("7//2", "3"),
        ("-7 % 3", "2"),
        ("(1 + 2) * 3", "9"),
        ("sqrt(1024)", "32.0"),
        ("abs(-3) + max(1, 5) - min(2, 4)", "6"),
        ("round(2.675, 2)", "2.67"),
        ("floor(2.7) + ceil(2.1)", "5"),
        ("factorial(10)", "3628800"),
        ("6 | 1", "7"),
        ("~0", "-1"),
        ("1 << 10", "1024"),
        ("12*4.5 + 5*19.99", "153.95"),
        ("  2 + 2  ", "4"),
        ("pow(2, 100, 7)", "2"),
    ],
)
def test_calc_has_python_semantics(expression: str, expected: str) -> None:
    result = call("calc", expression=expression)
    assert not result.is_error and result.content == expected


def test_calc_accepts_a_bare_number_argument() -> None:
    assert call("calc", expression=42).content == "42"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "function '__import__' is not allowed"),
        ("__import__('os').system('true')", "not allowed"),
        ("(1).real", "Attribute is not allowed"),
        ("().__class__", "not allowed"),
        ("open('/etc/passwd')", "function 'open' is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[i for i in range(3)]", "not allowed"),
        ("1 if 1 else 2", "not allowed"),
        ("1 < 2", "not allowed"),
        ("sqrt(x=4)", "positional"),
        ("9**9**9", "exponent 387420489 is too large"),
        ("10**5000", "too large"),
        ("2**20000", "too large"),
        ("(2**13000) * (2**13000) * (2**13000)", "too large"),
        ("1 << 100000", "too large"),
        ("factorial(100000)", "too large"),
        ("2.0**5000", "overflow"),
        ("1e308 * 10", "not a finite number"),
        ("1/0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("(-8) ** 0.5", "non-number"),
        ("32^", "could not parse"),
        ("2 = 3", "could not parse"),
        ("1" * 2000, "too long"),
    ],
)
def test_calc_refuses_unsafe_or_invalid_input_with_a_reason(expression: str, message: str) -> None:
    result = call("calc", expression=expression)
    assert result.is_error and message in result.content, result.content


def test_calc_guards_are_fast() -> None:
    start = time.perf_counter()
    for expression in ("9**9**9", "10**5000", "2**14000 * 2**14000", "factorial(1000)"):
        call("calc", expression=expression)
    assert time.perf_counter() - start < 1.0


def test_calc_deep_nesting_is_refused_or_evaluated_not_crashing() -> None:
    result = call("calc", expression="-" * 900 + "1")
    assert result.content in {"1", "error: expression is nested too deeply"}


# --- send_message -----------------------------------------------------------------------------


def test_send_message_records_in_the_world_with_sequential_ids() -> None:
    world = World()
    first = call("send_message", world, to="ops@example.com", body="deploy at 14:00")
    second = call("send_message", world, to=" dana@example.com ", body="ticket 00007")
    assert first.content == "message msg-0001 sent to ops@example.com"
    assert second.content == "message msg-0002 sent to dana@example.com"
    assert world.sent_messages == [
        {"id": "msg-0001", "to": "ops@example.com", "body": "deploy at 14:00"},
        {"id": "msg-0002", "to": "dana@example.com", "body": "ticket 00007"},
    ]


def test_each_episode_world_starts_empty() -> None:
    call("send_message", World(), to="ops@example.com", body="hi")
    fresh = World()
    call("send_message", fresh, to="ops@example.com", body="hi")
    assert [m["id"] for m in fresh.sent_messages] == ["msg-0001"]


@pytest.mark.parametrize(
    ("to", "body", "message"),
    [("ops", "hi", "not an email address"), ("ops@example.com", "  ", "non-empty")],
)
def test_send_message_rejects_bad_input(to: str, body: str, message: str) -> None:
    world = World()
    result = call("send_message", world, to=to, body=body)
    assert result.is_error and message in result.content and world.sent_messages == []


# --- read_record ------------------------------------------------------------------------------


def test_read_record_returns_json() -> None:
    record = json.loads(call("read_record", record_id="00042").content)
    assert record["name"] == "Ada Lovelace" and record["monthly_fee"] == 37.5


@pytest.mark.parametrize("record_id", ["42", 42, " 42 "])
def test_unpadded_id_gets_the_padding_hint(record_id: object) -> None:
    result = call("read_record", record_id=record_id)
    assert result.is_error
    assert result.content == (
        "error: no record '42'; record ids are 5-digit zero-padded, e.g. '00042'"
    )


def test_the_padding_hint_pads_the_given_id() -> None:
    assert "e.g. '00007'" in call("read_record", record_id="7").content


@pytest.mark.parametrize("record_id", ["99999", "abc", "000042"])
def test_unknown_record_is_an_error_without_a_misleading_hint(record_id: str) -> None:
    result = call("read_record", record_id=record_id)
    assert result.is_error and result.content == f"error: no record {record_id!r}"


# --- fetch_url --------------------------------------------------------------------------------


def test_fetch_url_returns_the_page() -> None:
    result = call("fetch_url", url="https://docs.examplecloud.dev/api/rate-limits")
    assert not result.is_error and re.search(r"^Pro\s+600\b", result.content, re.M)


def test_plain_http_is_refused_with_the_https_form_as_hint() -> None:
    result = call("fetch_url", url="http://docs.examplecloud.dev/api/rate-limits")
    assert result.is_error
    assert result.content == (
        "error: plain http is not allowed; use https://docs.examplecloud.dev/api/rate-limits"
    )


def test_unknown_url_is_a_404() -> None:
    result = call("fetch_url", url="https://docs.examplecloud.dev/api/nope")
    assert result.is_error and result.content.startswith("error: 404 Not Found")


@pytest.mark.parametrize("url", ["ftp://example.com/x", "docs.examplecloud.dev/api/rate-limits"])
def test_other_schemes_are_refused(url: str) -> None:
    result = call("fetch_url", url=url)
    assert result.is_error and "https://" in result.content


@pytest.mark.parametrize(
    "url",
    [
        "https://DOCS.examplecloud.dev/api/rate-limits/",
        " https://docs.examplecloud.dev/api/rate-limits",
    ],
)
def test_host_case_and_trailing_slash_do_not_matter(url: str) -> None:
    assert (
        call("fetch_url", url=url).content == PAGES["https://docs.examplecloud.dev/api/rate-limits"]
    )


def test_every_search_result_url_can_be_fetched() -> None:
    # A search hit that 404s when followed would be a harness artifact.
    for page in CORPUS:
        result = call("fetch_url", url=page.url)
        assert not result.is_error and result.content.strip()

"""Step alignment for the compare page, on unsaved steps (no DB)."""

from __future__ import annotations

import json
from typing import Any

from traces.compare import CHANGED, MAX_SHOWN_CHARS, ONLY_A, ONLY_B, SAME, align, cell
from traces.models import Step

GOAL = "What is the VRAM of the RTX 5090 in GB, squared?"


class Steps(list):
    """An episode's steps built in order, as the harness loop writes them."""

    def __init__(self) -> None:
        super().__init__(
            [Step(index=0, role="system", content="sys"), Step(index=1, role="user", content=GOAL)]
        )

    def tool(self, name: str, args: dict[str, Any] | str, result: str, error: bool = False):
        raw = args if isinstance(args, str) else json.dumps(args)
        parsed = None if isinstance(args, str) else args
        cid = f"call_{len(self)}"
        call = {"id": cid, "name": name, "arguments": raw, "parsed": parsed, "parse_error": None}
        self.append(Step(index=len(self), role="assistant", tool_calls=[call]))
        self.append(
            Step(
                index=len(self),
                role="tool",
                tool_call_id=cid,
                tool_name=name,
                content=result,
                is_error=error,
            )
        )
        return self

    def say(self, text: str) -> Steps:
        self.append(Step(index=len(self), role="assistant", content=text))
        return self


def table(steps_a: list[Step], steps_b: list[Step]) -> list[tuple[Any, Any, str]]:
    alignment = align(steps_a, steps_b)
    return [
        (r.a.index if r.a else None, r.b.index if r.b else None, r.status) for r in alignment.rows
    ]


def test_the_xor_failure_against_the_clean_run_diverges_at_the_calc_call() -> None:
    hit = "RTX 5090: 32 GB"
    nex = Steps().tool("web_search", {"query": "rtx 5090 vram"}, hit)
    nex.tool("calc", {"expression": "32^2"}, "34").say("34")
    base = Steps().tool("web_search", {"query": "rtx 5090 vram"}, hit)
    base.tool("calc", {"expression": "32**2"}, "1024").say("1024")
    alignment = align(nex, base)
    assert table(nex, base) == [
        (0, 0, SAME),
        (1, 1, SAME),
        (2, 2, SAME),
        (3, 3, SAME),
        (4, 4, CHANGED),
        (5, 5, CHANGED),
        (6, 6, CHANGED),
    ]
    assert alignment.divergence == 4 and alignment.rows[4].first_divergence
    assert [r.first_divergence for r in alignment.rows].count(True) == 1


def test_an_extra_search_is_inserted_not_mispaired() -> None:
    hit = "RTX 5090: 32 GB"
    one = Steps().tool("web_search", {"query": "rtx 5090 vram"}, hit)
    one.tool("calc", {"expression": "32**2"}, "1024").say("1024")
    two = Steps().tool("web_search", {"query": "5090 memory"}, "no match for '5090 memory'")
    two.tool("web_search", {"query": "rtx 5090 vram"}, hit)
    two.tool("calc", {"expression": "32**2"}, "1024").say("1024")
    # The failed search stands alone; the same search, calc and answer line up after it.
    assert table(one, two) == [
        (0, 0, SAME),
        (1, 1, SAME),
        (None, 2, ONLY_B),
        (None, 3, ONLY_B),
        (2, 4, SAME),
        (3, 5, SAME),
        (4, 6, SAME),
        (5, 7, SAME),
        (6, 8, SAME),
    ]
    assert align(one, two).divergence == 2


def test_argument_order_and_spacing_do_not_count_as_a_difference() -> None:
    a = Steps().tool("read_record", '{"id": "INV-1", "table": "invoices"}', "ok")
    b = Steps().tool("read_record", '{"table":"invoices","id":"INV-1"}', "ok")
    for steps in (a, b):  # parsed as the loop would have
        steps[2].tool_calls[0]["parsed"] = json.loads(steps[2].tool_calls[0]["arguments"])
    assert align(a, b).identical


def test_identical_episodes_have_no_divergence() -> None:
    a = Steps().tool("calc", {"expression": "1+1"}, "2").say("2")
    b = Steps().tool("calc", {"expression": "1+1"}, "2").say("2")
    alignment = align(a, b)
    assert alignment.identical and alignment.divergence is None
    assert all(r.status == SAME for r in alignment.rows)


def test_different_tools_at_one_place_pair_up_and_the_longer_side_continues() -> None:
    a = Steps().tool("calc", {"expression": "sum(range(2,21,2))"}, "error", error=True).say("90")
    b = Steps().tool("execute_python", {"code": "result = 110"}, "110")
    b.tool("execute_python", {"code": "result = 1"}, "1").say("110")
    rows = table(a, b)
    assert rows[:2] == [(0, 0, SAME), (1, 1, SAME)]
    assert rows[2] == (2, 2, CHANGED) and rows[-1] == (4, 6, CHANGED)
    assert {r for r in rows if r[2] == ONLY_B} == {(None, 4, ONLY_B), (None, 5, ONLY_B)}


def test_one_side_empty() -> None:
    a = Steps().say("x")
    alignment = align(a, [])
    assert [r.status for r in alignment.rows] == [ONLY_A] * 3 and alignment.divergence == 0
    assert align([], []).rows == [] and align([], []).identical


def test_cells_clip_long_text_and_pretty_print_arguments() -> None:
    steps = Steps().tool("read_file", {"path": "a.txt"}, "x" * (MAX_SHOWN_CHARS + 10))
    result = cell(steps[3])
    assert len(result.text) == MAX_SHOWN_CHARS and result.hidden_chars == 10
    assert cell(steps[2]).calls[0].arguments == '{\n  "path": "a.txt"\n}'
    raw = Steps().tool("calc", '{"expression": ', "error", error=True)
    assert cell(raw[2]).calls[0].arguments == '{"expression": '

"""near_miss: the page a query with misspelt words would have found (for reviewer hints)."""

from __future__ import annotations

import pytest

from benchrig.harness.tools.web_search import INDEX, near_miss


def test_a_misspelt_query_names_its_corrections_and_the_page() -> None:
    miss = near_miss("hieght of evrest mountian")
    assert miss is not None
    assert miss.corrections == (("evrest", "everest"), ("mountian", "mountain"))
    assert miss.page.title == "Mount Everest"
    assert INDEX.search("hieght of evrest mountian") == []
    gpu = near_miss("geforse vidoe")
    assert gpu is not None and gpu.page.title == "NVIDIA GeForce RTX 5090 specifications"


@pytest.mark.parametrize(
    "query",
    [
        "RTX 5090 specs VRAM GB",  # has hits: not a miss at all
        "blorp zzz qwertyuiop",  # nothing close
        "Geforse 5091",  # numbers are never fuzzed: a 5091 is not a 5090
    ],
)
def test_no_near_miss(query: str) -> None:
    assert near_miss(query) is None

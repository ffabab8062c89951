"""Align two episodes' steps side by side and find where they first diverge.

Pure: takes the steps, makes no queries. Steps are aligned on their *shape* (role and tool
names), so a search answered differently still pairs with the other side's search; whether a
pair is the *same* is then decided on the content (arguments, results, answers). The first row
that is not the same is the divergence.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from traces.models import Step

SAME = "same"
CHANGED = "changed"
ONLY_A = "only_a"
ONLY_B = "only_b"

# A step's text shown in the comparison; the trace viewer has the rest.
MAX_SHOWN_CHARS = 4_000


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # pretty-printed when they parsed, else the raw string as sent
    parse_error: str


@dataclass(frozen=True)
class Cell:
    """One step as the comparison shows it: long text clipped, arguments pretty-printed."""

    index: int
    role: str
    tool_name: str
    is_error: bool
    text: str
    hidden_chars: int
    calls: list[Call]


@dataclass(frozen=True)
class Row:
    a: Step | None
    b: Step | None
    status: str  # same | changed | only_a | only_b
    first_divergence: bool = False

    @property
    def cells(self) -> tuple[Cell | None, Cell | None]:
        return (cell(self.a) if self.a else None, cell(self.b) if self.b else None)


@dataclass(frozen=True)
class Alignment:
    rows: list[Row]
    divergence: int | None  # index into rows of the first row that is not the same

    @property
    def identical(self) -> bool:
        return self.divergence is None


def shape(step: Step) -> tuple[str, ...]:
    """What must match for two steps to sit side by side."""
    if step.role == Step.Role.TOOL:
        return (step.role, step.tool_name)
    if step.role == Step.Role.ASSISTANT:
        return (step.role, *(str(c.get("name") or "") for c in step.tool_calls or []))
    return (step.role,)


def signature(step: Step) -> tuple[Any, ...]:
    """What must match for two aligned steps to count as the same (role, tool, args, text)."""
    if step.role == Step.Role.ASSISTANT and step.tool_calls:
        return (step.role, tuple(_call_signature(c) for c in step.tool_calls))
    if step.role == Step.Role.TOOL:
        return (step.role, step.tool_name, step.is_error, step.content.strip())
    return (step.role, step.content.strip())


def _call_signature(call: dict[str, Any]) -> tuple[str, str]:
    parsed = call.get("parsed")
    # Parsed arguments compare regardless of key order and spacing; raw strings as sent.
    args = (
        json.dumps(parsed, sort_keys=True)
        if isinstance(parsed, dict)
        else str(call.get("arguments") or "")
    )
    return (str(call.get("name") or ""), args)


def align(a: Sequence[Step], b: Sequence[Step]) -> Alignment:
    """Rows pairing the steps of ``a`` and ``b`` in order, the first divergence marked.

    Identical steps are matched first (difflib over the full signatures); the stretches between
    them are then aligned on shape, so a call with other arguments sits beside its counterpart.
    """
    pairs: list[tuple[Step | None, Step | None]] = []
    for tag, i1, i2, j1, j2 in _opcodes([signature(s) for s in a], [signature(s) for s in b]):
        if tag == "equal":
            pairs.extend(zip(a[i1:i2], b[j1:j2], strict=True))
        else:
            pairs.extend(_align_shapes(a[i1:i2], b[j1:j2]))
    statuses = [_status(x, y) for x, y in pairs]
    divergence = next((n for n, status in enumerate(statuses) if status != SAME), None)
    rows = [
        Row(x, y, status, first_divergence=n == divergence)
        for n, ((x, y), status) in enumerate(zip(pairs, statuses, strict=True))
    ]
    return Alignment(rows, divergence)


def _opcodes(a: list[Any], b: list[Any]) -> list[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def _align_shapes(a: Sequence[Step], b: Sequence[Step]) -> list[tuple[Step | None, Step | None]]:
    pairs: list[tuple[Step | None, Step | None]] = []
    for tag, i1, i2, j1, j2 in _opcodes([shape(s) for s in a], [shape(s) for s in b]):
        if tag in ("equal", "replace"):
            # Same place: pair them in order, the longer side's rest alone.
            left: list[Step | None] = list(a[i1:i2])
            right: list[Step | None] = list(b[j1:j2])
            n = max(len(left), len(right))
            left += [None] * (n - len(left))
            right += [None] * (n - len(right))
            pairs.extend(zip(left, right, strict=True))
        elif tag == "delete":
            pairs.extend((s, None) for s in a[i1:i2])
        else:  # insert
            pairs.extend((None, s) for s in b[j1:j2])
    return pairs


def _status(a: Step | None, b: Step | None) -> str:
    if b is None:
        return ONLY_A
    if a is None:
        return ONLY_B
    return SAME if signature(a) == signature(b) else CHANGED


def clip(text: str, limit: int = MAX_SHOWN_CHARS) -> tuple[str, int]:
    """The first ``limit`` characters and how many were left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def cell(step: Step) -> Cell:
    text, hidden = clip(step.content)
    calls = []
    for call in step.tool_calls or []:
        parsed = call.get("parsed")
        if isinstance(parsed, dict):
            arguments = json.dumps(parsed, indent=2, ensure_ascii=False)
        else:
            arguments = str(call.get("arguments") or "")
        calls.append(
            Call(
                str(call.get("name") or ""),
                clip(arguments)[0],
                str(call.get("parse_error") or ""),
            )
        )
    return Cell(step.index, step.role, step.tool_name, step.is_error, text, hidden, calls)

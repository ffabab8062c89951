"""Suites are versioned data: one JSON file per suite in this folder, identified by a hash.

A run records the suite's name, version and ``content_hash`` (sha256 of the canonical JSON), so
two runs are comparable only when they ran the same tasks: re-indenting the file keeps the
hash, while changing any goal, check or tool list changes it. Files are validated on load and a
:class:`SuiteError` names the offending field, so a broken suite fails before any model runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchrig.harness.checks import CheckError, validate_check

SUITES_DIR = Path(__file__).resolve().parent

_SUITE_FIELDS = {
    "name": str,
    "version": str,
    "description": str,
    "system_prompt": str,
    "step_cap": int,
    "tasks": list,
}
_TASK_FIELDS = {
    "id": str,
    "axis": str,
    "goal": str,
    "tools": list,
    "check": dict,
    "optimal_calls": int,
}
_OPTIONAL_TASK_FIELDS = {"notes": str}
_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9_]*$")


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Task:
    id: str
    axis: str
    goal: str
    tools: tuple[str, ...]
    check: dict[str, Any]
    optimal_calls: int


@dataclass(frozen=True)
class Suite:
    name: str
    version: str
    description: str
    system_prompt: str
    step_cap: int
    tasks: Sequence[Task]
    content_hash: str

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"suite {self.name!r} has no task {task_id!r}")

    @property
    def axes(self) -> list[str]:
        """Axes in order of first appearance."""
        return list(dict.fromkeys(task.axis for task in self.tasks))


def content_hash(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def available_suites() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


def _resolve(name_or_path: str | Path) -> tuple[Path, str | None]:
    """The file to load and, when loaded by name, the name its ``name`` field must carry."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith(".json") or "/" in text or "\\" in text:
        return Path(name_or_path), None
    return SUITES_DIR / f"{text}.json", text


def load_suite(name_or_path: str | Path) -> Suite:
    """Load a suite by name (``"agentic-v1"``) from this folder, or from a path to a JSON file."""
    path, by_name = _resolve(name_or_path)
    if not path.is_file():
        raise SuiteError(
            f"no suite {str(name_or_path)!r} (looked for {path}); "
            f"available: {', '.join(available_suites()) or 'none'}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path.name}: not valid JSON: {exc}") from None
    suite = parse_suite(data, source=path.name)
    if by_name is not None and suite.name != by_name:
        raise SuiteError(f"{path.name}: name: {suite.name!r} does not match the file name")
    return suite


def _check_fields(
    raw: dict[str, Any], required: dict[str, type], optional: dict[str, type], where: str
) -> None:
    for key in required:
        if key not in raw:
            raise SuiteError(f"{where}: missing field {key!r}")
    for key, value in raw.items():
        kind = required.get(key) or optional.get(key)
        if kind is None:
            raise SuiteError(f"{where}.{key}: unknown field")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SuiteError(f"{where}.{key}: must be of type {kind.__name__}")


def _parse_task(raw: Any, where: str) -> Task:
    from benchrig.harness.tools import TOOL_CLASSES  # here: tools import the sandbox, keep it lazy

    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: must be an object")
    _check_fields(raw, _TASK_FIELDS, _OPTIONAL_TASK_FIELDS, where)
    if not _TASK_ID.match(raw["id"]):
        raise SuiteError(f"{where}.id: {raw['id']!r} must be lowercase letters, digits and _")
    for key in ("axis", "goal"):
        if not raw[key].strip():
            raise SuiteError(f"{where}.{key}: must not be empty")
    tools = raw["tools"]
    if not all(isinstance(t, str) for t in tools) or len(set(tools)) != len(tools):
        raise SuiteError(f"{where}.tools: must be a list of distinct tool names")
    unknown = [t for t in tools if t not in TOOL_CLASSES]
    if unknown:
        raise SuiteError(f"{where}.tools: unknown tool(s) {unknown}; known: {sorted(TOOL_CLASSES)}")
    try:
        validate_check(raw["check"])
    except CheckError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    if raw["optimal_calls"] < 0:
        raise SuiteError(f"{where}.optimal_calls: must be >= 0")
    return Task(
        id=raw["id"],
        axis=raw["axis"],
        goal=raw["goal"],
        tools=tuple(tools),
        check=dict(raw["check"]),
        optimal_calls=raw["optimal_calls"],
    )


def parse_suite(data: Any, *, source: str = "suite") -> Suite:
    """Validate already-decoded suite JSON and build a :class:`Suite`."""
    if not isinstance(data, dict):
        raise SuiteError(f"{source}: a suite must be a JSON object")
    _check_fields(data, _SUITE_FIELDS, {}, source)
    if not data["name"].strip():
        raise SuiteError(f"{source}.name: must not be empty")
    if data["step_cap"] < 1:
        raise SuiteError(f"{source}.step_cap: must be >= 1")
    if not data["tasks"]:
        raise SuiteError(f"{source}.tasks: a suite needs at least one task")
    tasks: list[Task] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["tasks"]):
        label = f"{source}: tasks[{i}]"
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            label += f" ({raw['id']})"
        task = _parse_task(raw, label)
        if task.id in seen:
            raise SuiteError(f"{label}.id: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    return Suite(
        name=data["name"],
        version=data["version"],
        description=data["description"],
        system_prompt=data["system_prompt"],
        step_cap=data["step_cap"],
        tasks=tuple(tasks),
        content_hash=content_hash(data),
    )

"""The tool registry: every tool a suite may offer, by name.

Tools are built fresh per episode around that episode's :class:`World`, so nothing one episode
does (messages sent, scratch files) leaks into another.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchrig.harness.tools.base import Tool, ToolError, ToolResult, World
from benchrig.harness.tools.calc import Calc
from benchrig.harness.tools.execute_python import ExecutePython
from benchrig.harness.tools.fetch_url import FetchUrl
from benchrig.harness.tools.read_file import ReadFile
from benchrig.harness.tools.read_record import ReadRecord
from benchrig.harness.tools.send_message import SendMessage
from benchrig.harness.tools.web_search import WebSearch

__all__ = ["TOOL_CLASSES", "Tool", "ToolError", "ToolResult", "World", "build_toolbox"]

TOOL_CLASSES: dict[str, type[Tool]] = {
    cls.name: cls
    for cls in (WebSearch, ReadFile, Calc, ExecutePython, SendMessage, ReadRecord, FetchUrl)
}


def build_toolbox(names: Sequence[str], world: World) -> dict[str, Tool]:
    """Instantiate the named tools around ``world``, in the order given."""
    unknown = [n for n in names if n not in TOOL_CLASSES]
    if unknown:
        raise KeyError(f"unknown tool(s) {unknown}; known tools: {sorted(TOOL_CLASSES)}")
    return {name: TOOL_CLASSES[name](world) for name in names}

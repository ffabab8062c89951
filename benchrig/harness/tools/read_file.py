"""Read a file from a small fixed, read-only, in-memory filesystem.

The files are part of the suite's world: tasks ask the model to read them and compute with the
contents, so they must never change without a suite version bump.
"""

from __future__ import annotations

import posixpath
from typing import Any, ClassVar

from benchrig.harness.tools.base import Tool, ToolError

FILES: dict[str, str] = {
    "/data/sales.csv": (
        "date,region,product,units,unit_price\n"
        "2024-01-05,north,widget,12,4.50\n"
        "2024-01-09,south,gadget,5,19.99\n"
        "2024-01-12,north,gadget,3,19.99\n"
        "2024-01-15,east,widget,20,4.50\n"
        "2024-01-21,south,widget,8,4.50\n"
        "2024-01-28,east,gizmo,2,99.00\n"
    ),
    "/data/README.md": (
        "# data\n\n"
        "sales.csv: January 2024 sales, one row per order. unit_price is in USD, before tax.\n"
    ),
    "/docs/config.yaml": (
        "service:\n"
        "  name: storefront\n"
        "  port: 8443\n"
        "  max_workers: 4\n"
        "billing:\n"
        "  currency: USD\n"
        "  tax_rate: 0.08  # applied to the pre-tax total\n"
        "  invoice_prefix: INV-\n"
    ),
    "/notes/oncall.txt": "This week on call: dana@example.com (backup: lee@example.com)\n",
    "/notes/todo.txt": (
        "TODO (week 3)\n"
        "- [x] rotate the staging API keys\n"
        '- [ ] send ops@example.com this notice: "deploy window moved to 14:00 UTC Thursday"\n'
        "- [ ] review the January sales numbers\n"
    ),
}


def _normalise(path: str) -> str:
    # Resolve relative paths against "/" the way a shell in the root directory would, so
    # "data/sales.csv" and "/data/./sales.csv" are not treated as model errors.
    return posixpath.normpath(posixpath.join("/", path.strip()))


def _listing(directory: str) -> list[str]:
    prefix = directory.rstrip("/") + "/"
    return sorted(p for p in FILES if p.startswith(prefix))


class ReadFile(Tool):
    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = (
        "Read a text file and return its contents. Paths are absolute, e.g. '/data/sales.csv'."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Absolute file path."}},
        "required": ["path"],
    }

    async def call(self, arguments: dict[str, Any]) -> str:
        raw = arguments["path"]
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string, e.g. '/data/sales.csv'")
        path = _normalise(raw)
        if path in FILES:
            return FILES[path]
        inside = _listing(path)
        if inside:
            raise ToolError(f"{path!r} is a directory; files in it: {', '.join(inside)}")
        siblings = _listing(posixpath.dirname(path))
        if siblings and posixpath.dirname(path) != "/":
            raise ToolError(
                f"no such file {path!r}; files in that directory: {', '.join(siblings)}"
            )
        raise ToolError(f"no such file {path!r}; available files: {', '.join(sorted(FILES))}")

"""Fetch one of a few fixed https pages.

Every URL the mock search returns is fetchable too (with its full text), so a model that
follows a search result never hits a 404 the harness made up. Plain ``http://`` is refused with
the https form as the hint: an error the model can recover from in one step.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from benchrig.harness.tools.base import Tool, ToolError
from benchrig.harness.tools.web_search import CORPUS

_RATE_LIMITS = """ExampleCloud API rate limits

Requests are counted per API key over a sliding 60-second window.

plan        requests per minute   burst
Free        60                    10
Pro         600                   100
Enterprise  6000                  1000

Exceeding the limit returns HTTP 429 with a Retry-After header (seconds).
"""


def _warehouse(name: str, items: list[tuple[str, str, int]]) -> str:
    stock = [{"sku": sku, "name": title, "qty": qty} for sku, title, qty in items]
    return json.dumps({"warehouse": name, "updated": "2024-02-01", "items": stock}, indent=2)


PAGES: dict[str, str] = {
    **{page.url: f"{page.title}\n\n{page.text}\n" for page in CORPUS},
    "https://docs.examplecloud.dev/api/rate-limits": _RATE_LIMITS,
    "https://inventory.example.com/api/warehouses/a": _warehouse(
        "a", [("WID-1", "widget", 140), ("GAD-2", "gadget", 35), ("GIZ-3", "gizmo", 8)]
    ),
    "https://inventory.example.com/api/warehouses/b": _warehouse(
        "b", [("WID-1", "widget", 95), ("GAD-2", "gadget", 12)]
    ),
    "https://shop.example.com/item/7": "Item 7: ergonomic keyboard. Price: 49 USD. In stock.",
    "https://status.example.com/api": '{"status": "degraded", "region": "eu-west"}',
}


def _normalise(url: str) -> str:
    # Host case and a trailing slash do not change which page a real server returns.
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


class FetchUrl(Tool):
    name: ClassVar[str] = "fetch_url"
    description: ClassVar[str] = "Fetch a web page over https and return its text."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "An https:// URL."}},
        "required": ["url"],
    }

    async def call(self, arguments: dict[str, Any]) -> str:
        raw = arguments["url"]
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("url must be a non-empty string, e.g. 'https://example.com/'")
        url = _normalise(raw)
        scheme = urlsplit(url).scheme
        if scheme == "http":
            raise ToolError(f"plain http is not allowed; use {'https' + url[len('http') :]}")
        if scheme != "https":
            raise ToolError(f"only https:// URLs can be fetched, e.g. 'https://{raw.strip()}'")
        if url not in PAGES:
            raise ToolError(f"404 Not Found: {url}")
        return PAGES[url]

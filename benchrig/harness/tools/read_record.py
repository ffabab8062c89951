"""Look up fixed records keyed by five-digit, zero-padded ids ("00042", never "42").

The padding is a documented contract (tool description) and the error for an unpadded id says
exactly how to fix it, so a model that slips costs itself one bad call, not the task.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from benchrig.harness.tools.base import Tool, ToolError

ID_WIDTH = 5

RECORDS: dict[str, dict[str, Any]] = {
    "00007": {
        "id": "00007",
        "type": "ticket",
        "title": "db-2 disk usage above 90%",
        "status": "open",
        "severity": "high",
        "assignee": "dana@example.com",
    },
    "00019": {
        "id": "00019",
        "type": "employee",
        "name": "Priya Natarajan",
        "role": "engineering manager",
    },
    "00023": {
        "id": "00023",
        "type": "employee",
        "name": "Sam Okafor",
        "role": "engineer",
        "manager_id": "00019",
    },
    "00041": {
        "id": "00041",
        "type": "account",
        "name": "Charles Babbage",
        "plan": "free",
        "balance": 15.0,
        "monthly_fee": 0.0,
    },
    "00042": {
        "id": "00042",
        "type": "account",
        "name": "Ada Lovelace",
        "plan": "pro",
        "balance": 1250.5,
        "monthly_fee": 37.5,
    },
    "00117": {
        "id": "00117",
        "type": "account",
        "name": "Grace Hopper",
        "plan": "team",
        "balance": 980.25,
        "monthly_fee": 120.0,
    },
}


class ReadRecord(Tool):
    name: ClassVar[str] = "read_record"
    description: ClassVar[str] = (
        "Fetch a record (account, ticket, employee) by id and return it as JSON. Record ids are "
        "5-digit zero-padded strings, e.g. '00042'."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "record_id": {"type": "string", "description": "5-digit zero-padded id, e.g. '00042'."}
        },
        "required": ["record_id"],
    }

    async def call(self, arguments: dict[str, Any]) -> str:
        raw = arguments["record_id"]
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise ToolError("record_id must be a string such as '00042'")
        record_id = str(raw).strip()
        if record_id in RECORDS:
            return json.dumps(RECORDS[record_id], indent=2)
        if record_id.isdigit() and len(record_id) < ID_WIDTH:
            raise ToolError(
                f"no record {record_id!r}; record ids are {ID_WIDTH}-digit zero-padded, "
                f"e.g. {record_id.zfill(ID_WIDTH)!r}"
            )
        raise ToolError(f"no record {record_id!r}")

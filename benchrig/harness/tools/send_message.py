"""Send a message: recorded in the episode's World, where world-state checks look for it."""

from __future__ import annotations

from typing import Any, ClassVar

from benchrig.harness.tools.base import Tool, ToolError


class SendMessage(Tool):
    name: ClassVar[str] = "send_message"
    description: ClassVar[str] = "Send a message to an email address. Returns a message id."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "to": {"type": "string", "description": "Recipient email address."},
            "body": {"type": "string", "description": "The message text."},
        },
        "required": ["to", "body"],
    }

    async def call(self, arguments: dict[str, Any]) -> str:
        to, body = arguments["to"], arguments["body"]
        if not isinstance(to, str) or "@" not in to:
            raise ToolError(f"{to!r} is not an email address, e.g. 'ops@example.com'")
        if not isinstance(body, str) or not body.strip():
            raise ToolError("body must be a non-empty string")
        # Ids count per episode, so the same episode always yields the same ids.
        message_id = f"msg-{len(self.world.sent_messages) + 1:04d}"
        self.world.sent_messages.append({"id": message_id, "to": to.strip(), "body": body})
        return f"message {message_id} sent to {to.strip()}"

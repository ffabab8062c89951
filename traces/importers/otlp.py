"""OpenTelemetry traces (OTLP JSON or protobuf) with GenAI spans → runs and episodes.

Input: an ExportTraceServiceRequest (resourceSpans → scopeSpans → spans), as OTLP/HTTP JSON
(ids in hex, attributes as typed AnyValue, 64-bit integers as strings or numbers), as protobuf,
or — for files — JSON lines of such requests (what the Collector's file exporter writes).
Spans are first normalised to plain dicts (`Span`), which is also what /v1/traces stores, so the
endpoint and file import assemble episodes with the same code.

Episodes: one per trace id. A trace becomes an episode once its *root* has arrived: the span
without a parent, or a span carrying `benchrig.task_id` / `benchrig.outcome` (for agents whose
parent span belongs to another service). Until then its spans are only kept. Spans are read in
start-time order; only spans with `gen_ai.operation.name` contribute messages:

- chat (also text_completion, generate_content): `gen_ai.input.messages` (JSON, the
  conversation sent) — the part beyond what the episode already holds is appended (new user
  turns, tool results); then `gen_ai.output.messages` (the reply) as assistant messages, with
  `gen_ai.usage.input_tokens` / `output_tokens` / `reasoning.output_tokens` and the span's
  duration as latency. `gen_ai.system_instructions` becomes the first system message. Older
  instrumentations' `gen_ai.prompt` / `gen_ai.completion` (span attributes, or the
  `gen_ai.content.prompt` / `gen_ai.content.completion` events) are read as OpenAI-format
  messages or plain text. A chat span without captured content still yields an (empty)
  assistant message, so its usage counts, and the tool spans that follow attach their calls to it.
- execute_tool: `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`,
  `gen_ai.tool.call.result` → a tool message, unless the next chat span's input already
  carried that call's result; an ERROR status or `error.type` marks it is_error.
- invoke_agent and other spans contribute no messages.

Message parts: text → content; reasoning → reasoning_content; tool_call {id, name, arguments}
→ tool_calls (a string argument is kept as sent, anything else JSON-encoded);
tool_call_response {id, response} → a tool message each; other parts → a `[type]` placeholder.

Episode fields, from the root span, else any span of the trace, else the resource:
task_id = `benchrig.task_id` (default: the trace id, so unrelated traces never collide);
axis = `benchrig.axis` (default ""); trial = `benchrig.trial` (default 0);
outcome = `benchrig.outcome` passed|failed|errored (default: errored — with the root span's
status message when its status is ERROR, else "no outcome"; nothing measured the model);
final_answer = `benchrig.final_answer` (default: the last assistant text); expected =
`benchrig.expected`; error = `benchrig.error`; goal = `benchrig.goal` (default: the first user
message). external_id = `otlp:<trace id>`; wall_ms = the root span's duration.

Runs: one per `benchrig.run` (span or resource attribute) when set, else one per
(`service.name`, model, sampling), since a run is one model configuration. model =
`gen_ai.request.model` (else `gen_ai.response.model`) of the first chat span; suite =
`benchrig.suite` (default: the service name, else "otlp"); suite_version =
`benchrig.suite_version` (default "1"); source = `telemetry.sdk.name` and `telemetry.sdk.version`;
sampling = the `gen_ai.request.*` parameters (temperature, top_p, top_k, max_tokens, seed,
frequency/presence penalty) of the first chat span; external_id = `otlp:<run key>`, so every trace
of a run lands in the same Run. Runs belong to the token's owner.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from traces.importers.base import ImportedRun, Importer, ImportFormatError

Span = dict[str, Any]

CHAT_OPERATIONS = {"chat", "text_completion", "generate_content"}
TOOL_OPERATION = "execute_tool"
OUTCOMES = {"passed", "failed", "errored"}
STATUS_ERROR = 2
HEX_ID = {"traceId": re.compile(r"^[0-9a-fA-F]{32}$"), "spanId": re.compile(r"^[0-9a-fA-F]{16}$")}
SAMPLING_ATTRIBUTES = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.top_k": "top_k",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.presence_penalty": "presence_penalty",
}


class OtlpImporter(Importer):
    format = "otlp-json"

    def read(self, stream: BinaryIO, *, name: str) -> Iterator[ImportedRun]:
        data = stream.read()
        try:
            json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as whole:
            # The Collector's file exporter writes one request per line.
            lines = [line for line in data.splitlines() if line.strip()]
            if len(lines) < 2:
                raise ImportFormatError("file", f"not JSON: {whole}") from None
            spans = []
            for number, line in enumerate(lines, start=1):
                try:
                    spans.extend(parse_json_request(line))
                except ImportFormatError as exc:
                    raise ImportFormatError(f"line {number}: {exc.where}", exc.message) from None
        else:
            spans = parse_json_request(data)
        runs = assemble(spans)
        if not runs:
            raise ImportFormatError(
                "file",
                f"{len(spans)} spans, but no trace with its root span (a span without a parent,"
                " or with benchrig.task_id or benchrig.outcome)",
            )
        yield from runs


# --- decoding --------------------------------------------------------------------------------


def parse_json_request(data: bytes) -> list[Span]:
    """Spans of an OTLP/HTTP JSON ExportTraceServiceRequest, normalised."""
    try:
        request = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError("body", f"not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise ImportFormatError("body", "must be a JSON object (an ExportTraceServiceRequest)")
    if request and "resourceSpans" not in request:
        keys = ", ".join(sorted(request)[:5])
        raise ImportFormatError(
            "body", f"not an ExportTraceServiceRequest: no resourceSpans (keys: {keys})"
        )
    resource_spans = _list(request, "resourceSpans", "")
    spans: list[Span] = []
    for r, rs in enumerate(resource_spans):
        where = f"resourceSpans[{r}]"
        if not isinstance(rs, dict):
            raise ImportFormatError(where, "must be an object")
        resource = _attributes(
            (rs.get("resource") or {}).get("attributes"), f"{where}.resource.attributes"
        )
        for s, ss in enumerate(_list(rs, "scopeSpans", where)):
            swhere = f"{where}.scopeSpans[{s}]"
            if not isinstance(ss, dict):
                raise ImportFormatError(swhere, "must be an object")
            scope = str((ss.get("scope") or {}).get("name") or "")
            for i, raw in enumerate(_list(ss, "spans", swhere)):
                spans.append(_json_span(raw, f"{swhere}.spans[{i}]", resource, scope))
    return spans


def _list(parent: dict[str, Any], key: str, where: str) -> list[Any]:
    value = parent.get(key, [])
    if not isinstance(value, list):
        raise ImportFormatError(f"{where}.{key}".lstrip("."), "must be a list")
    return value


def _json_span(raw: Any, where: str, resource: dict[str, Any], scope: str) -> Span:
    if not isinstance(raw, dict):
        raise ImportFormatError(where, "must be an object")
    ids = {}
    for key in ("traceId", "spanId"):
        value = raw.get(key)
        if not isinstance(value, str) or not HEX_ID[key].match(value):
            size = 32 if key == "traceId" else 16
            raise ImportFormatError(
                f"{where}.{key}", f"must be {size} hex characters, got {value!r}"
            )
        ids[key] = value.lower()
    parent = raw.get("parentSpanId") or ""
    if parent and not (isinstance(parent, str) and HEX_ID["spanId"].match(parent)):
        raise ImportFormatError(f"{where}.parentSpanId", "must be 16 hex characters or empty")
    status = raw.get("status") or {}
    events = []
    for e, event in enumerate(raw.get("events") or []):
        ewhere = f"{where}.events[{e}]"
        if not isinstance(event, dict):
            raise ImportFormatError(ewhere, "must be an object")
        events.append(
            {
                "name": str(event.get("name") or ""),
                "time_ns": _int(event.get("timeUnixNano", 0), f"{ewhere}.timeUnixNano"),
                "attributes": _attributes(event.get("attributes"), f"{ewhere}.attributes"),
            }
        )
    start = _int(raw.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano")
    end = _int(raw.get("endTimeUnixNano", start), f"{where}.endTimeUnixNano")
    return _checked(
        where,
        {
            "trace_id": ids["traceId"],
            "span_id": ids["spanId"],
            "parent_span_id": parent.lower() if parent else "",
            "name": str(raw.get("name") or ""),
            "kind": _int(raw.get("kind", 0), f"{where}.kind"),
            "start_ns": start,
            "end_ns": end,
            "attributes": _attributes(raw.get("attributes"), f"{where}.attributes"),
            "events": events,
            "status_code": _int(status.get("code", 0), f"{where}.status.code"),
            "status_message": str(status.get("message") or ""),
            "resource": resource,
            "scope": scope,
        },
    )


def _int(value: Any, where: str) -> int:
    # OTLP/JSON encodes 64-bit integers as strings; numbers are accepted too.
    if isinstance(value, bool):
        raise ImportFormatError(where, f"must be an integer, got {value!r}")
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        value = int(value)
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ImportFormatError(where, f"out of the 64-bit range: {value}")
        return value
    raise ImportFormatError(where, f"must be an integer, got {value!r}")


def _attributes(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ImportFormatError(where, "must be a list of {key, value}")
    out: dict[str, Any] = {}
    for i, kv in enumerate(raw):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise ImportFormatError(f"{where}[{i}]", "must be an object with a string 'key'")
        out[kv["key"]] = _any_value(kv.get("value"), f"{where}[{i}].value")
    return out


def _any_value(raw: Any, where: str) -> Any:
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ImportFormatError(where, "must be an AnyValue with exactly one typed field")
    ((kind, value),) = raw.items()
    if kind == "stringValue" and isinstance(value, str):
        return value
    if kind == "boolValue" and isinstance(value, bool):
        return value
    if kind == "intValue":
        return _int(value, f"{where}.intValue")
    if kind == "doubleValue" and isinstance(value, int | float | str):
        try:
            return float(value)
        except ValueError:
            pass
    if kind == "arrayValue" and isinstance(value, dict):
        items = value.get("values") or []
        return [_any_value(v, f"{where}.arrayValue.values[{i}]") for i, v in enumerate(items)]
    if kind == "kvlistValue" and isinstance(value, dict):
        return _attributes(value.get("values") or [], f"{where}.kvlistValue.values")
    if kind == "bytesValue" and isinstance(value, str):
        return base64.b64decode(value).hex()
    raise ImportFormatError(where, f"unsupported AnyValue {kind!r} = {value!r}")


def parse_protobuf_request(data: bytes) -> list[Span]:
    """Spans of an OTLP/HTTP protobuf ExportTraceServiceRequest, normalised."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as exc:
        raise ImportFormatError("body", f"not an ExportTraceServiceRequest: {exc}") from None
    spans: list[Span] = []
    for r, rs in enumerate(request.resource_spans):
        resource = _pb_attributes(rs.resource.attributes)
        for s, ss in enumerate(rs.scope_spans):
            for i, span in enumerate(ss.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                if len(span.trace_id) != 16:
                    raise ImportFormatError(f"{where}.traceId", "must be 16 bytes")
                if len(span.span_id) != 8:
                    raise ImportFormatError(f"{where}.spanId", "must be 8 bytes")
                spans.append(
                    _checked(
                        where,
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": int(span.kind),
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "attributes": _pb_attributes(span.attributes),
                            "events": [
                                {
                                    "name": e.name,
                                    "time_ns": e.time_unix_nano,
                                    "attributes": _pb_attributes(e.attributes),
                                }
                                for e in span.events
                            ],
                            "status_code": int(span.status.code),
                            "status_message": span.status.message,
                            "resource": resource,
                            "scope": ss.scope.name,
                        },
                    )
                )
    return spans


def _pb_attributes(items: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def _pb_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _pb_attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


# --- assembling ------------------------------------------------------------------------------


def _checked(where: str, span: Span) -> Span:
    """The span, once its GenAI content and benchrig attributes read cleanly. Checked on arrival,
    so a trace never gets stuck on a bad span that came before its root."""
    if span["start_ns"] >= 2**63 or span["end_ns"] >= 2**63:
        raise ImportFormatError(f"{where}.startTimeUnixNano", "out of the 64-bit range")
    if span["end_ns"] < span["start_ns"]:
        raise ImportFormatError(f"{where}.endTimeUnixNano", "is before startTimeUnixNano")
    attrs = span["attributes"]
    if attrs.get("gen_ai.operation.name") in CHAT_OPERATIONS:
        _input_messages(span, f"{where}.attributes")
        _output_messages(span, f"{where}.attributes")
    if "benchrig.outcome" in attrs:
        _outcome(attrs["benchrig.outcome"], f"{where}.attributes[benchrig.outcome]")
    if "benchrig.trial" in attrs:
        _trial(attrs["benchrig.trial"], f"{where}.attributes[benchrig.trial]")
    return span


def _outcome(value: Any, where: str) -> str:
    if value not in OUTCOMES:
        raise ImportFormatError(
            where, f"must be one of {', '.join(sorted(OUTCOMES))}, got {value!r}"
        )
    return value


def _trial(value: Any, where: str) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ImportFormatError(where, f"must be an integer >= 0, got {value!r}")
    return value


def is_root(span: Span) -> bool:
    attrs = span["attributes"]
    return not span["parent_span_id"] or "benchrig.task_id" in attrs or "benchrig.outcome" in attrs


def assemble(spans: list[Span]) -> list[ImportedRun]:
    """Runs with their episodes, one episode per trace that has its root span."""
    traces: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        traces[span["trace_id"]].append(span)
    runs: dict[str, ImportedRun] = {}
    for trace_spans in traces.values():
        built = trace_episode(trace_spans)
        if built is None:
            continue
        run, episode = built
        key = run["external_id"]
        if key not in runs:
            runs[key] = ImportedRun(run=run, episodes=[])
        runs[key].episodes.append(episode)
    return list(runs.values())


def trace_episode(spans: list[Span]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(run, episode) for one trace's spans, or None while its root has not arrived."""
    spans = sorted(spans, key=lambda s: (s["start_ns"], s["end_ns"], s["span_id"]))
    roots = [s for s in spans if is_root(s)]
    if not roots:
        return None
    root = roots[0]
    trace_id = root["trace_id"]

    def attr(key: str) -> Any:
        for span in [root, *spans]:
            if span["attributes"].get(key) is not None:
                return span["attributes"][key]
        return root["resource"].get(key)

    messages = _transcript(spans)
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") in CHAT_OPERATIONS]
    first_chat = chats[0]["attributes"] if chats else {}
    model = str(
        first_chat.get("gen_ai.request.model")
        or first_chat.get("gen_ai.response.model")
        or attr("gen_ai.request.model")
        or "unknown"
    )
    service = str(root["resource"].get("service.name") or "")
    sampling = {
        name: first_chat[key] for key, name in SAMPLING_ATTRIBUTES.items() if key in first_chat
    }
    run_key = attr("benchrig.run")
    if run_key is None:
        # A run is one model configuration: traces sent with other sampling land in another run.
        run_key = f"{service}:{model}"
        if sampling:
            digest = hashlib.sha256(json.dumps(sampling, sort_keys=True).encode()).hexdigest()
            run_key += f":{digest[:8]}"
    run_key = str(run_key)
    run = {
        "model": model,
        "suite": str(attr("benchrig.suite") or service or "otlp"),
        "suite_version": str(attr("benchrig.suite_version") or "1"),
        "source": {
            "name": str(root["resource"].get("telemetry.sdk.name") or "opentelemetry"),
            "version": str(root["resource"].get("telemetry.sdk.version") or ""),
        },
        "sampling": sampling,
        "metadata": {"otlp": {"service": service, "run": run_key}},
        "external_id": f"otlp:{run_key}",
    }

    where = f"trace {trace_id}"
    outcome = attr("benchrig.outcome")
    error = str(attr("benchrig.error") or "")
    if outcome is not None:
        outcome = _outcome(outcome, f"{where}: benchrig.outcome")
    else:
        outcome = "errored"
        if not error:
            error = (
                root["status_message"] or "the root span ended with an ERROR status"
                if root["status_code"] == STATUS_ERROR
                else "no outcome: the trace set no benchrig.outcome"
            )
    trial = _trial(attr("benchrig.trial") or 0, f"{where}: benchrig.trial")
    last_text = next(
        (m["content"] for m in reversed(messages) if m["role"] == "assistant" and m["content"]), ""
    )
    first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
    episode: dict[str, Any] = {
        "task_id": str(attr("benchrig.task_id") or trace_id),
        "axis": str(attr("benchrig.axis") or ""),
        "trial": trial,
        "external_id": f"otlp:{trace_id}",
        "goal": str(attr("benchrig.goal") or first_user or ""),
        "outcome": outcome,
        "final_answer": str(attr("benchrig.final_answer") or last_text or ""),
        "error": error,
        "wall_ms": (root["end_ns"] - root["start_ns"]) / 1e6,
        "messages": messages,
    }
    expected = attr("benchrig.expected")
    if expected is not None and outcome != "errored":
        episode["check"] = {
            "passed": outcome == "passed",
            "expected": str(expected),
            "got": episode["final_answer"],
        }
    return run, episode


def _transcript(spans: list[Span]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    answered: set[str] = set()  # tool call ids that already have a tool message
    bare: dict[str, Any] | None = None  # an assistant message from a chat span without content

    for span in spans:
        attrs = span["attributes"]
        operation = attrs.get("gen_ai.operation.name")
        where = f"trace {span['trace_id']} span {span['span_id']}"
        if operation in CHAT_OPERATIONS:
            inputs = _input_messages(span, where)
            for message in _new_inputs(inputs, messages):
                if message["role"] == "tool":
                    if message["tool_call_id"] in answered:
                        continue
                    answered.add(message["tool_call_id"])
                messages.append(message)
            outputs = _output_messages(span, where)
            if not outputs:
                outputs = [{"role": "assistant", "content": None}]
                bare = outputs[0]
            else:
                bare = None
            outputs[-1]["usage"] = {
                "prompt_tokens": int(attrs.get("gen_ai.usage.input_tokens") or 0),
                "completion_tokens": int(attrs.get("gen_ai.usage.output_tokens") or 0),
                "reasoning_tokens": int(attrs.get("gen_ai.usage.reasoning.output_tokens") or 0),
            }
            outputs[-1]["latency_ms"] = (span["end_ns"] - span["start_ns"]) / 1e6
            messages.extend(outputs)
        elif operation == TOOL_OPERATION:
            call_id = str(attrs.get("gen_ai.tool.call.id") or span["span_id"])
            name = str(attrs.get("gen_ai.tool.name") or "")
            if bare is not None:
                bare.setdefault("tool_calls", []).append(
                    _call(call_id, name, attrs.get("gen_ai.tool.call.arguments"))
                )
            if call_id in answered:
                continue
            answered.add(call_id)
            failed = span["status_code"] == STATUS_ERROR or "error.type" in attrs
            result = attrs.get("gen_ai.tool.call.result")
            if result is None and failed:
                result = span["status_message"] or attrs.get("error.type")
            messages.append(
                {
                    "role": "tool",
                    "content": _as_text(result),
                    "tool_call_id": call_id,
                    "name": name,
                    "is_error": failed,
                }
            )
    _name_tool_messages(messages)
    return messages


def _new_inputs(inputs: list[dict[str, Any]], seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of a chat span's input that the transcript does not hold yet."""
    if not seen:
        return inputs
    # Usually the input is the whole conversation so far plus what is new.
    if len(inputs) > len(seen) and [m["role"] for m in inputs[: len(seen)]] == [
        m["role"] for m in seen
    ]:
        return inputs[len(seen) :]
    # Otherwise treat it as a delta: whatever follows the last assistant turn it repeats.
    last_assistant = max((i for i, m in enumerate(inputs) if m["role"] == "assistant"), default=-1)
    return [m for m in inputs[last_assistant + 1 :] if m["role"] != "system"]


def _input_messages(span: Span, where: str) -> list[dict[str, Any]]:
    attrs = span["attributes"]
    messages: list[dict[str, Any]] = []
    instructions = attrs.get("gen_ai.system_instructions")
    if instructions is not None:
        parts = _json(instructions, f"{where}: gen_ai.system_instructions")
        if isinstance(parts, dict):
            parts = [parts]
        if not isinstance(parts, list):
            raise ImportFormatError(f"{where}: gen_ai.system_instructions", "must be a list")
        text, _, _, _ = _parts(parts, f"{where}: gen_ai.system_instructions")
        messages.append({"role": "system", "content": text})
    raw = attrs.get("gen_ai.input.messages")
    if raw is not None:
        messages.extend(_semconv_messages(raw, f"{where}: gen_ai.input.messages"))
        return messages
    legacy = _legacy(span, "gen_ai.prompt", "gen_ai.content.prompt")
    if legacy is not None:
        messages.extend(_legacy_messages(legacy, "user", f"{where}: gen_ai.prompt"))
    return messages


def _output_messages(span: Span, where: str) -> list[dict[str, Any]]:
    raw = span["attributes"].get("gen_ai.output.messages")
    if raw is not None:
        return _semconv_messages(raw, f"{where}: gen_ai.output.messages")
    legacy = _legacy(span, "gen_ai.completion", "gen_ai.content.completion")
    if legacy is not None:
        return _legacy_messages(legacy, "assistant", f"{where}: gen_ai.completion")
    return []


def _legacy(span: Span, key: str, event_name: str) -> Any:
    if key in span["attributes"]:
        return span["attributes"][key]
    for event in span["events"]:
        if event["name"] == event_name and key in event["attributes"]:
            return event["attributes"][key]
    return None


def _json(value: Any, where: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(where, f"not JSON: {exc}") from None


def _semconv_messages(raw: Any, where: str) -> list[dict[str, Any]]:
    items = _json(raw, where)
    if not isinstance(items, list):
        raise ImportFormatError(where, "must be a JSON list of messages")
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        mwhere = f"{where}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("parts"), list):
            raise ImportFormatError(mwhere, "a message needs a role and a list of parts")
        role = item.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise ImportFormatError(f"{mwhere}.role", f"unknown role {role!r}")
        text, reasoning, calls, responses = _parts(item["parts"], mwhere)
        for call_id, response in responses:
            messages.append({"role": "tool", "content": response, "tool_call_id": call_id})
        if responses and not text and not calls:
            continue
        message: dict[str, Any] = {
            "role": role,
            "content": text,
            "reasoning_content": reasoning,
        }
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
    return messages


def _parts(
    parts: list[Any], where: str
) -> tuple[str, str | None, list[dict[str, Any]], list[tuple[str, str]]]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    responses: list[tuple[str, str]] = []
    for p, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind is None:
            raise ImportFormatError(f"{where}.parts[{p}]", "a part needs a 'type'")
        if kind == "text":
            texts.append(_as_text(part.get("content")))
        elif kind == "reasoning":
            reasoning.append(_as_text(part.get("content")))
        elif kind == "tool_call":
            if not isinstance(part.get("name"), str):
                raise ImportFormatError(f"{where}.parts[{p}].name", "a tool call needs a name")
            calls.append(_call(str(part.get("id") or ""), part["name"], part.get("arguments")))
        elif kind == "tool_call_response":
            responses.append((str(part.get("id") or ""), _as_text(part.get("response"))))
        else:
            texts.append(f"[{kind}]")
    return "\n".join(texts), ("\n".join(reasoning) if reasoning else None), calls, responses


def _call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    if arguments is None:
        raw = "{}"
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def _legacy_messages(raw: Any, default_role: str, where: str) -> list[dict[str, Any]]:
    value = _json(raw, where) if isinstance(raw, str) and raw[:1] in "[{" else raw
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise ImportFormatError(where, "must be text or a JSON list of messages")
    messages = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ImportFormatError(f"{where}[{i}]", "must be a message object")
        message: dict[str, Any] = {
            "role": item.get("role") or default_role,
            "content": _as_text(item.get("content")),
        }
        if item.get("tool_calls"):
            message["tool_calls"] = [
                _call(
                    str(c.get("id") or ""),
                    str((c.get("function") or {}).get("name") or ""),
                    (c.get("function") or {}).get("arguments"),
                )
                for c in item["tool_calls"]
            ]
        if item.get("tool_call_id"):
            message["tool_call_id"] = str(item["tool_call_id"])
        messages.append(message)
    return messages


def _name_tool_messages(messages: list[dict[str, Any]]) -> None:
    names = {
        call["id"]: call["function"]["name"] for m in messages for call in m.get("tool_calls") or []
    }
    for message in messages:
        if message["role"] == "tool" and not message.get("name"):
            message["name"] = names.get(message.get("tool_call_id") or "", "")


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)

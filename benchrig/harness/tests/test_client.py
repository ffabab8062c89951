from __future__ import annotations

import asyncio
import socket

import pytest

from benchrig.harness.client import (
    BackendError,
    ChatClient,
    Sampling,
    normalize_base_url,
    split_reasoning,
)
from benchrig.harness.testing import Reply, answer, scripted_server, sequence, tool_call


def complete(client: ChatClient, messages: list[dict] | None = None):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        async with client:
            return await client.complete(messages or [{"role": "user", "content": "hi"}], [])

    return asyncio.run(go())


def test_request_carries_tools_sampling_and_extras() -> None:
    with scripted_server(sequence(answer("ok"))) as server:
        sampling = Sampling(
            temperature=0.0,
            top_k=40,
            reasoning_effort="low",
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        client = ChatClient(base_url=server.base_url, model="m", sampling=sampling, api_key="sk-x")
        tools = [{"type": "function", "function": {"name": "calc", "parameters": {}}}]

        async def go():  # type: ignore[no-untyped-def]
            async with client:
                return await client.complete([{"role": "user", "content": "hi"}], tools)

        resp = asyncio.run(go())
    body = server.requests[0]
    assert body["model"] == "m" and body["tools"] == tools
    assert body["temperature"] == 0.0 and body["top_k"] == 40 and body["reasoning_effort"] == "low"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "top_p" not in body  # unset sampling fields are not sent
    assert resp.content == "ok" and resp.finish_reason == "stop"


def test_usage_and_reasoning_content() -> None:
    reply = answer("42", reasoning="let me think", prompt=11, completion=7, reasoning_tokens=5)
    with scripted_server(sequence(reply)) as server:
        resp = complete(ChatClient(base_url=server.base_url, model="m"))
    assert resp.reasoning == "let me think"
    assert (
        resp.usage.prompt_tokens,
        resp.usage.completion_tokens,
        resp.usage.reasoning_tokens,
    ) == (11, 7, 5)
    assert resp.latency_ms > 0


def test_think_tags_are_split_when_server_does_not() -> None:
    assert split_reasoning("<think>hmm\n</think>\n\nThe answer is 4.", None) == (
        "The answer is 4.",
        "hmm",
    )
    assert split_reasoning("<think>cut off mid-thought", None) == ("", "cut off mid-thought")
    assert split_reasoning("plain", None) == ("plain", "")
    assert split_reasoning("<think>x</think>y", "server split") == (
        "<think>x</think>y",
        "server split",
    )


def test_tool_call_arguments_kept_as_sent() -> None:
    with scripted_server(sequence(tool_call("calc", '{"expression": "32^2"'))) as server:
        resp = complete(ChatClient(base_url=server.base_url, model="m"))
    assert resp.tool_calls[0].name == "calc"
    assert resp.tool_calls[0].arguments == '{"expression": "32^2"'


def test_500_then_200_is_retried() -> None:
    script = sequence(Reply({"error": "boom"}, status=500), Reply("busy", status=429), answer("ok"))
    with scripted_server(script) as server:
        resp = complete(ChatClient(base_url=server.base_url, model="m", backoff_s=0.01))
    assert resp.content == "ok" and len(server.requests) == 3


def test_persistent_5xx_gives_up_with_reason() -> None:
    with scripted_server(lambda body: Reply({"error": "down"}, status=503)) as server:
        client = ChatClient(base_url=server.base_url, model="m", max_retries=2, backoff_s=0.01)
        with pytest.raises(BackendError, match="gave up after 3 attempts; last: HTTP 503"):
            complete(client)
    assert len(server.requests) == 3


def test_4xx_is_not_retried() -> None:
    with scripted_server(lambda body: Reply({"error": "bad key"}, status=401)) as server:
        with pytest.raises(BackendError, match="HTTP 401"):
            complete(ChatClient(base_url=server.base_url, model="m", backoff_s=0.01))
    assert len(server.requests) == 1


def test_invalid_json_is_a_backend_error() -> None:
    with scripted_server(sequence(Reply(b"<html>not json"))) as server:
        with pytest.raises(BackendError, match="invalid JSON"):
            complete(ChatClient(base_url=server.base_url, model="m"))


def test_connection_refused_is_retried_then_fails() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ChatClient(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, backoff_s=0.01
    )
    with pytest.raises(BackendError, match="ConnectError"):
        complete(client)


def test_base_url_normalisation() -> None:
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert (
        normalize_base_url("https://api.example.com/openai/v1")
        == "https://api.example.com/openai/v1"
    )
    with pytest.raises(ValueError, match="base URL must be"):
        normalize_base_url("localhost:8000")


def test_errors_never_carry_the_api_key() -> None:
    key = "sk-echoed-in-error-77"
    echo = Reply({"error": {"message": f"Incorrect API key provided: {key}"}}, status=401)
    with scripted_server(sequence(echo)) as server:
        client = ChatClient(base_url=server.base_url, model="m", api_key=key, max_retries=0)
        with pytest.raises(BackendError) as info:
            complete(client)
    message = str(info.value)
    assert "HTTP 401" in message and "Incorrect API key provided: [API key]" in message
    assert key not in message

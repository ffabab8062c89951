"""The ingestion wire shape (INGEST.md) and what the API reads back.

Every producer — the HTTP API, the file importers, the OTLP endpoint — is validated against these
schemas, so an error always names the offending field by its path in the payload.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, ConfigDict, Field, model_validator

MAX_INT = 2**31 - 1  # PositiveIntegerField's ceiling on PostgreSQL


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; refusing it here names the field instead of failing the
    # whole batch inside the database.
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
Count = Annotated[int, Field(ge=0, le=MAX_INT)]


class StrictSchema(Schema):
    # Unknown keys are an error, not silently dropped: "nothing stored is lost" includes fields
    # a producer misspelled.
    model_config = ConfigDict(extra="forbid")


class SourceIn(StrictSchema):
    name: Annotated[Text, Field(max_length=100)]
    version: Annotated[Text, Field(max_length=50)] = ""


class RunIn(StrictSchema):
    model: Annotated[Text, Field(min_length=1, max_length=200)]
    suite: Annotated[Text, Field(min_length=1, max_length=100)]
    suite_version: Annotated[Text, Field(min_length=1, max_length=50)] = "1"
    suite_hash: Annotated[Text, Field(max_length=64)] = ""
    source: SourceIn | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    external_id: Annotated[Text, Field(min_length=1, max_length=200)] | None = None


class FunctionIn(StrictSchema):
    name: Annotated[Text, Field(max_length=100)]
    # As the model sent it; invalid JSON is stored and flagged, never rejected.
    arguments: Text


class ToolCallIn(StrictSchema):
    id: Annotated[Text, Field(max_length=200)]
    type: Literal["function"] = "function"
    function: FunctionIn


class UsageIn(StrictSchema):
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    reasoning_tokens: Count = 0


class MessageIn(StrictSchema):
    role: Literal["system", "user", "assistant", "tool"]
    content: Text | None = None
    reasoning_content: Text | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: Annotated[Text, Field(max_length=200)] | None = None
    name: Annotated[Text, Field(max_length=100)] | None = None
    is_error: bool = False
    usage: UsageIn | None = None
    latency_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class CheckIn(StrictSchema):
    passed: bool
    expected: Text = ""
    got: Text = ""
    detail: Text = ""


class EpisodeIn(StrictSchema):
    task_id: Annotated[Text, Field(min_length=1, max_length=100)]
    axis: Annotated[Text, Field(max_length=50)] = ""
    trial: Count = 0
    external_id: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    goal: Text = ""
    outcome: Literal["passed", "failed", "errored"] | None = None
    check: CheckIn | None = None
    final_answer: Text = ""
    error: Text = ""
    optimal_calls: Count | None = None
    stalled: bool = False
    wall_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    messages: list[MessageIn] = Field(default_factory=list)

    @model_validator(mode="after")
    def _outcome_agrees_with_check(self) -> EpisodeIn:
        if self.outcome is None and self.check is None:
            raise ValueError("give an outcome (passed|failed|errored) or a check result")
        if self.outcome is not None and self.check is not None:
            implied = "passed" if self.check.passed else "failed"
            if self.outcome != implied:
                raise ValueError(
                    f"outcome {self.outcome!r} disagrees with check.passed={self.check.passed}"
                )
        return self

    @property
    def resolved_outcome(self) -> str:
        if self.outcome is not None:
            return self.outcome
        assert self.check is not None  # the validator guarantees one of them
        return "passed" if self.check.passed else "failed"


class EpisodesIn(StrictSchema):
    episodes: list[EpisodeIn] = Field(min_length=1)


# ---- read side ------------------------------------------------------------------------------


class FunctionOut(Schema):
    name: str
    arguments: str


class ToolCallOut(Schema):
    id: str
    type: Literal["function"] = "function"
    function: FunctionOut
    # Set when the arguments are not a JSON object: stored as sent, counted as a bad call.
    parse_error: str | None = None


class UsageOut(Schema):
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int


class MessageOut(Schema):
    index: int
    role: str
    content: str
    reasoning_content: str
    tool_calls: list[ToolCallOut]
    tool_call_id: str
    name: str
    is_error: bool
    usage: UsageOut | None
    latency_ms: float | None


class CheckOut(Schema):
    passed: bool
    expected: str
    got: str
    detail: str


class VerdictOut(Schema):
    id: int
    label: str
    reason: str
    step_index: int | None
    note: str
    reviewer: str | None
    created_at: datetime


class EpisodeSummaryOut(Schema):
    id: int
    run_id: int
    task_id: str
    axis: str
    trial: int
    external_id: str
    outcome: str
    verdict_label: str
    n_steps: int
    n_tool_calls: int
    optimal_calls: int
    bad_calls: int
    model_calls: int
    stalled: bool
    tool_efficiency: float
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    wall_ms: float


class EpisodeOut(EpisodeSummaryOut):
    goal: str
    check: CheckOut | None
    final_answer: str
    error: str
    messages: list[MessageOut]
    verdicts: list[VerdictOut]


class SourceOut(Schema):
    format: str
    name: str
    version: str


class RunOut(Schema):
    id: int
    model: str
    suite: str
    suite_version: str
    suite_hash: str
    source: SourceOut
    status: str
    sampling: dict[str, Any]
    metadata: dict[str, Any]
    external_id: str | None
    n_total: int
    n_done: int
    n_passed: int
    n_failed: int
    n_errored: int
    created_at: datetime
    finished_at: datetime | None


class IngestOut(Schema):
    run_id: int
    created: int
    unchanged: int


class ErrorItem(Schema):
    path: str
    message: str


class ErrorOut(Schema):
    detail: str
    errors: list[ErrorItem] = Field(default_factory=list)


class RunVerdictOut(VerdictOut):
    episode_id: int


class RunPage(Schema):
    count: int
    items: list[RunOut]


class EpisodePage(Schema):
    count: int
    items: list[EpisodeOut]


class ImportOut(Schema):
    runs: list[RunOut]


class PageParams(Schema):
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0)

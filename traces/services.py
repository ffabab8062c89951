"""Writes for traces: creating runs, recording what the harness does, finishing runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from benchrig.harness import HARNESS_VERSION
from benchrig.harness.client import ChatClient, Sampling, normalize_base_url
from benchrig.harness.records import EpisodeKey, EpisodeRecord, StepRecord
from benchrig.harness.runner import plan, run_suite
from benchrig.harness.sink import ThreadedSink
from benchrig.harness.suites import Suite, load_suite
from traces.models import Backend, Episode, Run, Step, Verdict
from traces.selectors import run_counts, run_finished_keys, run_summary

SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "max_tokens", "reasoning_effort")


def backend_snapshot(*, backend: Backend) -> dict[str, Any]:
    """The backend's configuration as recorded on a run. Never includes the API key."""
    return {
        "name": backend.name,
        "base_url": backend.base_url,
        "model": backend.model,
        # 0 and 0.0 are settings (greedy decoding), only None and "" mean unset.
        "sampling": {
            f: getattr(backend, f) for f in SAMPLING_FIELDS if getattr(backend, f) not in (None, "")
        },
        "extra_body": backend.extra_body,
        "timeout_s": backend.timeout_s,
        "max_concurrency": backend.max_concurrency,
        "has_api_key": bool(backend.api_key),
    }


# Settings an operator edits on a Backend (the API key is handled on its own: write-only).
BACKEND_FIELDS = (
    "name",
    "base_url",
    "model",
    *SAMPLING_FIELDS,
    "extra_body",
    "timeout_s",
    "max_concurrency",
)
# extra_body is merged into every request last; these keys would break the harness's own request.
RESERVED_BODY_KEYS = frozenset({"model", "messages", "tools", "tool_choice", "stream", "n"})


def validate_extra_body(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError(
            {"extra_body": 'must be a JSON object, e.g. {"chat_template_kwargs": {}}'}
        )
    reserved = sorted(RESERVED_BODY_KEYS & value.keys())
    if reserved:
        raise ValidationError(
            {"extra_body": f"must not set {', '.join(reserved)}: the harness sends those itself"}
        )


def _backend_save(*, backend: Backend) -> Backend:
    validate_extra_body(backend.extra_body)
    backend.full_clean()
    backend.save()
    return backend


def backend_create(
    *, name: str, base_url: str, model: str, api_key: str = "", **fields: Any
) -> Backend:
    """A new backend; raises ValidationError naming the field on bad input, storing nothing."""
    unknown = set(fields) - set(BACKEND_FIELDS)
    if unknown:
        raise TypeError(f"unknown backend field(s): {sorted(unknown)}")
    backend = Backend(name=name, base_url=base_url, model=model, api_key=api_key, **fields)
    return _backend_save(backend=backend)


def backend_update(
    *, backend: Backend, api_key: str | None = None, clear_api_key: bool = False, **fields: Any
) -> Backend:
    """Change settings. ``api_key=None`` keeps the stored key (the form never shows it), a new
    value replaces it, and ``clear_api_key`` removes it. Runs keep their own snapshot."""
    unknown = set(fields) - set(BACKEND_FIELDS)
    if unknown:
        raise TypeError(f"unknown backend field(s): {sorted(unknown)}")
    for key, value in fields.items():
        setattr(backend, key, value)
    if clear_api_key:
        backend.api_key = ""
    elif api_key:
        backend.api_key = api_key
    try:
        return _backend_save(backend=backend)
    except ValidationError:
        backend.refresh_from_db()  # the caller's object must not keep the rejected values
        raise


def backend_delete(*, backend: Backend) -> int:
    """Delete a backend. Its runs stay (Run.backend becomes NULL; each keeps its snapshot).
    Returns how many runs were kept."""
    with transaction.atomic():
        kept = Run.objects.filter(backend=backend).count()
        backend.delete()
    return kept


def backend_upsert(
    *, name: str, base_url: str, model: str, api_key: str | None = None, **fields: Any
) -> Backend:
    """Create or update by name (the CLI and `make run` register backends this way). Raises
    ValueError naming the field on bad input."""
    normalize_base_url(base_url)  # fail early, with the reason, on a malformed URL
    existing = Backend.objects.filter(name=name).first()
    try:
        if existing is None:
            return backend_create(
                name=name, base_url=base_url, model=model, api_key=api_key or "", **fields
            )
        return backend_update(
            backend=existing, base_url=base_url, model=model, api_key=api_key, **fields
        )
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


def validation_message(exc: ValidationError) -> str:
    """One line naming each offending field, for the CLI and logs."""
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)


def run_create(
    *,
    backend: Backend,
    suite: Suite,
    trials: int = 1,
    concurrency: int | None = None,
    sampling: dict[str, Any] | None = None,
    triggered_by: AbstractBaseUser | None = None,
) -> Run:
    if trials < 1:
        raise ValueError("trials must be at least 1")
    snapshot = backend_snapshot(backend=backend)
    snapshot["sampling"].update({k: v for k, v in (sampling or {}).items() if v is not None})
    return Run.objects.create(
        backend=backend,
        model_name=backend.model,
        backend_config=snapshot,
        suite_name=suite.name,
        suite_version=suite.version,
        suite_hash=suite.content_hash,
        harness_version=HARNESS_VERSION,
        source=Run.Source.HARNESS,
        source_name="benchrig",
        source_version=HARNESS_VERSION,
        trials=trials,
        concurrency=concurrency or backend.max_concurrency,
        n_total=len(suite.tasks) * trials,
        triggered_by=triggered_by,
    )


def episode_start(*, run: Run, key: EpisodeKey, goal: str) -> Episode:
    """Create the episode row, or reset one a crashed attempt left half-written."""
    with transaction.atomic():
        episode, created = Episode.objects.get_or_create(
            run=run,
            task_id=key.task_id,
            trial=key.trial,
            defaults={"axis": key.axis, "goal": goal},
        )
        if not created:
            Step.objects.filter(episode=episode).delete()
            Episode.objects.filter(pk=episode.pk).update(
                outcome=Episode.Outcome.RUNNING, error="", n_steps=0, finished_at=None
            )
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
    return episode


def step_record(*, episode: Episode, step: StepRecord) -> Step:
    return Step.objects.create(
        episode=episode,
        index=step.index,
        role=step.role,
        content=step.content,
        reasoning=step.reasoning,
        tool_calls=[call.as_dict() for call in step.tool_calls],
        tool_call_id=step.tool_call_id,
        tool_name=step.tool_name,
        is_error=step.is_error,
        prompt_tokens=step.prompt_tokens,
        completion_tokens=step.completion_tokens,
        reasoning_tokens=step.reasoning_tokens,
        latency_ms=step.latency_ms,
        finish_reason=step.finish_reason or "",
        raw_response=step.raw_response,
    )


RECORD_FIELDS = (
    "outcome",
    "final_answer",
    "check_expected",
    "check_got",
    "check_detail",
    "error",
    "n_steps",
    "n_tool_calls",
    "optimal_calls",
    "bad_calls",
    "model_calls",
    "stalled",
    "tool_efficiency",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "wall_ms",
)


def episode_finish(*, episode: Episode, record: EpisodeRecord) -> bool:
    """Store the outcome; bump the run's counters only on the running → final transition, so a
    redelivered finish is a no-op. Returns whether this call made the transition."""
    values = {f: getattr(record, f) for f in RECORD_FIELDS}
    with transaction.atomic():
        moved = Episode.objects.filter(pk=episode.pk, outcome=Episode.Outcome.RUNNING).update(
            finished_at=timezone.now(), **values
        )
        if moved:
            bump = {"n_done": F("n_done") + 1, f"n_{record.outcome}": F(f"n_{record.outcome}") + 1}
            Run.objects.filter(pk=episode.run_id).update(heartbeat_at=timezone.now(), **bump)
    return bool(moved)


def run_mark(*, run: Run, status: str, error: str = "") -> Run:
    """Finish (or re-open) a run: counters recomputed from the episodes, summary cached."""
    now = timezone.now()
    fields: dict[str, Any] = {"status": status, "heartbeat_at": now, **run_counts(run=run)}
    if status == Run.Status.RUNNING:
        fields["started_at"] = run.started_at or now
        fields["finished_at"] = None
    else:
        fields["finished_at"] = now
        fields["summary"] = run_summary(run=run).as_dict()
    if error:
        fields["error"] = error
    Run.objects.filter(pk=run.pk).update(**fields)
    run.refresh_from_db()
    return run


def episodes_abandon(*, run: Run, reason: str) -> int:
    """Episodes still running when a run stops become errored, keeping their steps."""
    return Episode.objects.filter(run=run, outcome=Episode.Outcome.RUNNING).update(
        outcome=Episode.Outcome.ERRORED, error=reason, finished_at=timezone.now()
    )


@dataclass
class DjangoSink:
    """A blocking sink that writes each event to the database before returning.

    ThreadedSink runs it on one thread, so it owns that thread's DB connection.
    """

    run: Run
    suite: Suite
    on_finished: Callable[[EpisodeRecord], None] | None = None

    def __post_init__(self) -> None:
        self.goals = {task.id: task.goal for task in self.suite.tasks}
        self.episodes: dict[EpisodeKey, Episode] = {}

    def episode_started(self, key: EpisodeKey) -> None:
        self.episodes[key] = episode_start(run=self.run, key=key, goal=self.goals[key.task_id])

    def step(self, key: EpisodeKey, step: StepRecord) -> None:
        step_record(episode=self.episodes[key], step=step)

    def episode_finished(self, record: EpisodeRecord) -> None:
        episode_finish(episode=self.episodes.pop(record.key), record=record)
        if self.on_finished:
            self.on_finished(record)

    def close(self) -> None:
        connection.close()


def client_for_run(*, run: Run) -> ChatClient:
    config = run.backend_config
    if run.backend is None:
        raise ValueError(f"run {run.pk} has no backend to call")
    sampling = config.get("sampling", {})
    return ChatClient(
        base_url=config["base_url"],
        model=config["model"],
        api_key=run.backend.api_key,
        sampling=Sampling(
            **{k: sampling.get(k) for k in SAMPLING_FIELDS},
            extra_body=config.get("extra_body") or {},
        ),
        timeout_s=config.get("timeout_s", 120.0),
    )


def run_execute(*, run_id: int, on_finished: Callable[[EpisodeRecord], None] | None = None) -> Run:
    """Execute (or resume) a run: every (task, trial) not yet final is run and stored.

    Interrupts (Ctrl-C) leave the run cancelled with every finished episode kept.
    """
    run = Run.objects.select_related("backend").get(pk=run_id)
    suite = load_suite(run.suite_name)
    if suite.content_hash != run.suite_hash:
        return run_mark(
            run=run,
            status=Run.Status.FAILED,
            error=f"suite {run.suite_name} changed since the run was created "
            f"(hash {suite.content_hash[:12]} ≠ {run.suite_hash[:12]}); create a new run",
        )
    run = run_mark(run=run, status=Run.Status.RUNNING)
    sink = ThreadedSink(DjangoSink(run=run, suite=suite, on_finished=on_finished))
    skip = run_finished_keys(run=run)
    client = client_for_run(run=run)  # DB reads stay outside the event loop

    async def go() -> None:
        async with client:
            await run_suite(
                client=client,
                suite=suite,
                trials=run.trials,
                concurrency=run.concurrency,
                sink=sink,
                skip=skip,
            )

    try:
        asyncio.run(go())
    except KeyboardInterrupt:
        sink.close()
        episodes_abandon(run=run, reason="cancelled: the run was interrupted")
        run_mark(run=run, status=Run.Status.CANCELLED, error="interrupted")
        raise
    except BaseException as exc:
        sink.close()
        episodes_abandon(run=run, reason=f"harness: {exc!r}")
        run_mark(run=run, status=Run.Status.FAILED, error=repr(exc))
        raise
    sink.close()
    return run_mark(run=run, status=_final_status(run=run, planned=len(plan(suite, run.trials))))


def _final_status(*, run: Run, planned: int) -> str:
    counts = run_counts(run=run)
    if counts["n_done"] < planned:
        return Run.Status.FAILED
    # Every episode errored: nothing measured the model, so the run itself failed.
    if counts["n_errored"] == planned:
        return Run.Status.FAILED
    return Run.Status.SUCCEEDED


def verdict_record(
    *,
    episode: Episode,
    label: str,
    reviewer: AbstractBaseUser | None,
    reason: str = "",
    step: Step | None = None,
    note: str = "",
) -> Verdict:
    """Append a verdict; it becomes the episode's current one. History is never rewritten: two
    reviewers tagging at once both keep their rows, and the later one is current."""
    if label not in Verdict.Label.values:
        raise ValueError(f"unknown verdict label {label!r}; choose one of {Verdict.Label.values}")
    if reason and reason not in Verdict.Reason.values:
        raise ValueError(f"unknown reason {reason!r}; choose one of {Verdict.Reason.values}")
    if step is not None and step.episode_id != episode.pk:
        raise ValueError(f"step {step.pk} belongs to another episode")
    with transaction.atomic():
        # Lock the episode row so concurrent verdicts serialise and `replaces` chains stay linear.
        Episode.objects.select_for_update().filter(pk=episode.pk).first()
        previous = Verdict.objects.filter(episode=episode).order_by("-created_at", "-id").first()
        verdict = Verdict.objects.create(
            episode=episode,
            label=label,
            reason=reason,
            step=step,
            note=note,
            reviewer=reviewer,
            replaces=previous,
        )
        Episode.objects.filter(pk=episode.pk).update(verdict_label=label)
    episode.verdict_label = label
    return verdict

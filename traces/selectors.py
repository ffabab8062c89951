"""Reads and aggregates for traces."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.http import QueryDict
from django.utils import timezone

from benchrig.harness.scoring import EpisodeOutcome, Summary, summarize
from traces.models import Backend, Episode, Run, Step, Verdict


def run_summary(*, run: Run) -> Summary:
    """The run's scores, from its finished episodes, in one query."""
    rows = (
        Episode.objects.filter(run=run)
        .exclude(outcome=Episode.Outcome.RUNNING)
        .values_list(
            "task_id", "axis", "outcome", "tool_efficiency", "stalled", "completion_tokens"
        )
    )
    return summarize(EpisodeOutcome(*row) for row in rows)


def run_counts(*, run: Run) -> dict[str, int]:
    agg = Episode.objects.filter(run=run).aggregate(
        n_done=Count("id", filter=~Q(outcome=Episode.Outcome.RUNNING)),
        n_passed=Count("id", filter=Q(outcome=Episode.Outcome.PASSED)),
        n_failed=Count("id", filter=Q(outcome=Episode.Outcome.FAILED)),
        n_errored=Count("id", filter=Q(outcome=Episode.Outcome.ERRORED)),
    )
    return {k: int(v or 0) for k, v in agg.items()}


def run_finished_keys(*, run: Run) -> set[tuple[str, int]]:
    """(task, trial) pairs that already have a final outcome, to skip when resuming."""
    return set(
        Episode.objects.filter(run=run)
        .exclude(outcome=Episode.Outcome.RUNNING)
        .values_list("task_id", "trial")
    )


def run_list() -> QuerySet[Run]:
    return Run.objects.select_related("backend").order_by("-created_at", "-id")


def episode_steps(*, episode: Episode) -> QuerySet[Step]:
    return Step.objects.filter(episode=episode).order_by("index")


def backend_list() -> QuerySet[Backend]:
    """Backends with how many runs each has, in one query."""
    return Backend.objects.annotate(n_runs=Count("run")).order_by("name")


@dataclass(frozen=True)
class RunProgress:
    """What the progress bar shows; computed from the run's counters, no query."""

    done: int
    total: int
    passed: int
    failed: int
    errored: int
    elapsed_s: float | None
    eta_s: float | None  # None until there is a throughput to extrapolate from

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 0

    def share(self, count: int) -> float:
        """Width of one outcome's segment of the bar, in percent."""
        return round(100 * count / self.total, 2) if self.total else 0.0

    @property
    def passed_pct(self) -> float:
        return self.share(self.passed)

    @property
    def failed_pct(self) -> float:
        return self.share(self.failed)

    @property
    def errored_pct(self) -> float:
        return self.share(self.errored)


def run_progress(*, run: Run, now: datetime | None = None) -> RunProgress:
    """Done / total and an ETA from the throughput so far (episodes done per second since the
    run started). A finished run has no ETA."""
    now = now or timezone.now()
    elapsed = None
    if run.started_at:
        elapsed = ((run.finished_at or now) - run.started_at).total_seconds()
    eta = None
    remaining = max(0, run.n_total - run.n_done)
    if run.status in LIVE_STATUSES and elapsed and run.n_done and remaining:
        eta = remaining * elapsed / run.n_done
    return RunProgress(
        done=run.n_done,
        total=run.n_total,
        passed=run.n_passed,
        failed=run.n_failed,
        errored=run.n_errored,
        elapsed_s=elapsed,
        eta_s=eta,
    )


# Runs whose page keeps polling for progress (a stale run may come back to life).
LIVE_STATUSES = frozenset(Run.Status.active())


def run_episodes(*, run: Run) -> QuerySet[Episode]:
    """The run's episodes for its page: the columns the table shows, in one query."""
    return (
        Episode.objects.filter(run=run)
        .only(
            "id",
            "run_id",
            "task_id",
            "axis",
            "trial",
            "outcome",
            "error",
            "stalled",
            "verdict_label",
            "check_expected",
            "check_got",
            "n_tool_calls",
            "optimal_calls",
            "bad_calls",
            "completion_tokens",
            "wall_ms",
        )
        .order_by("trial", "axis", "task_id")
    )


def run_status_words(*, run: Run) -> str:
    """The run's state in a sentence, for people rather than for code."""
    words = {
        Run.Status.QUEUED: "Waiting for a worker to pick it up.",
        Run.Status.RUNNING: "Workers are executing episodes; results appear as they finish.",
        Run.Status.SUCCEEDED: "Every planned episode has a result.",
        Run.Status.PARTIAL: "Every episode finished, but some errored (the backend or the "
        "harness broke): the scores cover only the measured episodes. Retry the errored ones "
        "to complete it.",
        Run.Status.FAILED: "Nothing measured the model: every episode errored or the run could "
        "not execute" + (f" ({run.error})." if run.error else "."),
        Run.Status.CANCELLED: "Finished episodes are kept; the rest did not run.",
        Run.Status.STALE: "No worker has reported for a while: its worker probably vanished. "
        "Resume it to run what is left; finished episodes are kept.",
    }
    return words.get(run.status, run.get_status_display())


# --- The failure queue -----------------------------------------------------------------------

QUEUE_PAGE_SIZE = 50
VERDICT_STATES = ("untagged", *Verdict.Label.values)
OUTCOME_STATES = (Episode.Outcome.FAILED, Episode.Outcome.ERRORED, Episode.Outcome.PASSED)
DEFAULT_OUTCOMES = (Episode.Outcome.FAILED, Episode.Outcome.ERRORED)
# Every sort is a tuple ending in the primary key, all in one direction, so a page boundary is a
# strict keyset comparison that an index serves, as cheap on the thousandth page as on the first.
QUEUE_SORTS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    # name: (label, key fields, descending)
    "newest": ("newest first", ("id",), True),
    "oldest": ("oldest first", ("id",), False),
    "task": ("task", ("task_id", "id"), False),
    "tokens": ("most tokens", ("completion_tokens", "id"), True),
    "steps": ("most steps", ("n_steps", "id"), True),
}


def is_id(value: str) -> bool:
    """A whole number that fits a database id (bigint), so lookups never overflow."""
    return value.isascii() and value.isdigit() and len(value) <= 18


class QueueFilterError(ValueError):
    """A query string the queue cannot honour; the message names the parameter and value."""


@dataclass(frozen=True)
class QueueFilters:
    runs: tuple[int, ...] = ()
    backends: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    axes: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = DEFAULT_OUTCOMES
    verdicts: tuple[str, ...] = ()  # () = every verdict state
    sort: str = "newest"

    @classmethod
    def from_query(cls, data: QueryDict) -> QueueFilters:
        def strings(name: str, *, commas: bool = False) -> tuple[str, ...]:
            # The form's text boxes take "a, b" for several axes or tasks.
            values = data.getlist(name)
            if commas:
                values = [part for v in values for part in v.split(",")]
            return tuple(dict.fromkeys(v.strip() for v in values if v.strip()))

        def chosen(name: str, allowed: Sequence[str]) -> tuple[str, ...]:
            values = strings(name)
            for value in values:
                if value not in allowed:
                    raise QueueFilterError(f"{name}={value!r} is not one of {', '.join(allowed)}")
            return values

        runs = []
        for value in strings("run"):
            if not is_id(value):
                raise QueueFilterError(f"run={value!r} is not a run id (a whole number)")
            runs.append(int(value))
        sort = data.get("sort") or "newest"
        if sort not in QUEUE_SORTS:
            raise QueueFilterError(f"sort={sort!r} is not one of {', '.join(QUEUE_SORTS)}")
        return cls(
            runs=tuple(runs),
            backends=strings("backend"),
            models=strings("model"),
            suites=strings("suite"),
            axes=strings("axis", commas=True),
            tasks=strings("task", commas=True),
            outcomes=chosen("outcome", OUTCOME_STATES) or DEFAULT_OUTCOMES,
            verdicts=chosen("verdict", VERDICT_STATES),
            sort=sort,
        )

    def query_pairs(self) -> list[tuple[str, str | int]]:
        """The filters as query-string pairs (defaults left out), for links that keep them."""
        pairs: list[tuple[str, str | int]] = [("run", r) for r in self.runs]
        for name, values in (
            ("backend", self.backends),
            ("model", self.models),
            ("suite", self.suites),
            ("axis", self.axes),
            ("task", self.tasks),
        ):
            pairs += [(name, v) for v in values]
        if set(self.outcomes) != set(DEFAULT_OUTCOMES):
            pairs += [("outcome", o) for o in self.outcomes]
        pairs += [("verdict", v) for v in self.verdicts]
        if self.sort != "newest":
            pairs.append(("sort", self.sort))
        return pairs

    def querystring(self) -> str:
        return urlencode(self.query_pairs())


def _queue_base(filters: QueueFilters) -> QuerySet[Episode]:
    """Episodes matching every filter except outcome and verdict (the two counted facets)."""
    qs = Episode.objects.all()
    if filters.runs:
        qs = qs.filter(run_id__in=filters.runs)
    if filters.backends:
        qs = qs.filter(run__backend__name__in=filters.backends)
    if filters.models:
        qs = qs.filter(run__model_name__in=filters.models)
    if filters.suites:
        qs = qs.filter(run__suite_name__in=filters.suites)
    if filters.axes:
        qs = qs.filter(axis__in=filters.axes)
    if filters.tasks:
        qs = qs.filter(task_id__in=filters.tasks)
    return qs


def _verdict_q(verdicts: Sequence[str]) -> Q:
    labels = ["" if v == "untagged" else v for v in verdicts]
    return Q(verdict_label__in=labels) if labels else Q()


def _queue_queryset(filters: QueueFilters) -> QuerySet[Episode]:
    chosen = Q(outcome__in=filters.outcomes) & _verdict_q(filters.verdicts)
    return _queue_base(filters).filter(chosen)


@dataclass(frozen=True)
class QueueCounts:
    total: int
    # Within the chosen verdict states; None for an outcome the filter leaves out (passed, by
    # default): counting every passed episode would make the queue's cost grow with the table.
    by_outcome: dict[str, int | None]
    by_verdict: dict[str, int]  # within the chosen outcomes


def queue_counts(*, filters: QueueFilters) -> QueueCounts:
    """Exact facet counts in one GROUP BY over (outcome, verdict_label), read from the
    episode_review_facets index: at most 15 rows back."""
    rows = (
        _queue_base(filters)
        .filter(outcome__in=filters.outcomes)
        .values_list("outcome", "verdict_label")
        .annotate(n=Count("*"))
        .order_by()
    )
    wanted_verdicts = set(filters.verdicts or VERDICT_STATES)
    by_outcome: dict[str, int | None] = {
        o: 0 if o in filters.outcomes else None for o in OUTCOME_STATES
    }
    by_verdict = dict.fromkeys(VERDICT_STATES, 0)
    total = 0
    for outcome, label, n in rows:
        state = label or "untagged"
        by_verdict[state] = by_verdict.get(state, 0) + n
        if state in wanted_verdicts:
            by_outcome[outcome] = (by_outcome[outcome] or 0) + n
            total += n
    return QueueCounts(total=total, by_outcome=by_outcome, by_verdict=by_verdict)


def _keyset(filters: QueueFilters, anchor: Episode, *, forward: bool) -> QuerySet[Episode]:
    """Rows strictly after (forward) or before the anchor in the queue's order."""
    _, fields, descending = QUEUE_SORTS[filters.sort]
    later = forward != descending  # moving towards larger keys?
    op = "gt" if later else "lt"
    values = [getattr(anchor, f) for f in fields]
    qs = _queue_queryset(filters)
    if len(fields) == 1:
        qs = qs.filter(**{f"{fields[0]}__{op}": values[0]})
    else:
        (lead, tie), (lead_value, tie_value) = fields, values
        # The first conjunct bounds an index range; the second breaks ties on the primary key.
        qs = qs.filter(
            Q(**{f"{lead}__{op}e": lead_value}),
            Q(**{f"{lead}__{op}": lead_value}) | Q(**{lead: lead_value, f"{tie}__{op}": tie_value}),
        )
    order = [f if later else f"-{f}" for f in fields]
    return qs.order_by(*order)


def _ordered(filters: QueueFilters) -> QuerySet[Episode]:
    _, fields, descending = QUEUE_SORTS[filters.sort]
    return _queue_queryset(filters).order_by(*[f"-{f}" if descending else f for f in fields])


QUEUE_ROW_FIELDS = (
    "id",
    "run_id",
    "task_id",
    "axis",
    "trial",
    "outcome",
    "verdict_label",
    "check_expected",
    "check_got",
    "n_steps",
    "n_tool_calls",
    "bad_calls",
    "stalled",
    "completion_tokens",
    "error",
    "run__model_name",
    "run__suite_name",
    "run__backend__name",
)


@dataclass(frozen=True)
class QueuePage:
    rows: list[Episode]
    has_previous: bool
    has_next: bool

    @property
    def first_id(self) -> int | None:
        return self.rows[0].pk if self.rows else None

    @property
    def last_id(self) -> int | None:
        return self.rows[-1].pk if self.rows else None


def _row_fields(qs: QuerySet[Episode]) -> QuerySet[Episode]:
    return qs.select_related("run", "run__backend").only(*QUEUE_ROW_FIELDS)


def queue_page(
    *,
    filters: QueueFilters,
    after: Episode | None = None,
    before: Episode | None = None,
    size: int = QUEUE_PAGE_SIZE,
) -> QueuePage:
    """One page of the queue, by keyset from an anchor episode: two queries at any depth."""
    if before is not None:
        rows = list(_row_fields(_keyset(filters, before, forward=False))[: size + 1])
        has_previous = len(rows) > size
        rows = rows[:size][::-1]
        has_next = bool(rows) and _keyset(filters, rows[-1], forward=True).exists()
    else:
        qs = _keyset(filters, after, forward=True) if after is not None else _ordered(filters)
        rows = list(_row_fields(qs)[: size + 1])
        has_next = len(rows) > size
        rows = rows[:size]
        has_previous = (
            after is not None and bool(rows) and _keyset(filters, rows[0], forward=False).exists()
        )
    return QueuePage(rows=rows, has_previous=has_previous, has_next=has_next)


def queue_neighbours(*, filters: QueueFilters, episode: Episode) -> tuple[int | None, int | None]:
    """The ids of the episodes before and after this one in the queue (it need not match)."""
    prev_id = _keyset(filters, episode, forward=False).values_list("id", flat=True).first()
    next_id = _keyset(filters, episode, forward=True).values_list("id", flat=True).first()
    return prev_id, next_id


def queue_choices(*, filters: QueueFilters) -> dict[str, list[Any]]:
    """What the filter form offers: recent runs and the backends, models and suites in use,
    plus whatever the filters already name, so that changing one filter never drops another."""
    fields = ("id", "model_name", "suite_name")
    runs = list(Run.objects.order_by("-id").values_list(*fields)[:200])
    missing = set(filters.runs) - {r[0] for r in runs}
    if missing:  # an older run from a bookmark: one more query, for those ids only
        runs += list(Run.objects.filter(id__in=missing).order_by("-id").values_list(*fields))
    names = Run.objects.order_by().values_list("model_name", "suite_name").distinct()
    models = sorted({m for m, _ in names} | set(filters.models))
    suites = sorted({s for _, s in names} | set(filters.suites))
    backends = Backend.objects.order_by("name").values_list("name", flat=True)
    return {
        "runs": runs,
        "models": models,
        "suites": suites,
        "backends": sorted(set(backends) | set(filters.backends)),
    }


# --- The trace viewer --------------------------------------------------------------------------


def episode_trace(*, episode: Episode) -> list[Step]:
    # The raw provider response is kept for audits, not shown: no need to ship it from the DB.
    return list(episode_steps(episode=episode).defer("raw_response"))


def episode_verdicts(*, episode: Episode) -> list[Verdict]:
    """The full history, newest first, with who replaced what: one query."""
    return list(
        Verdict.objects.filter(episode=episode)
        .select_related("reviewer", "step", "replaces", "replaces__reviewer")
        .order_by("-created_at", "-id")
    )


@dataclass
class TraceCall:
    """A tool call as asked for, with the tool step that answered it (matched by call id)."""

    id: str
    name: str
    arguments: str
    pretty: str | None  # the parsed arguments, indented; None when they did not parse
    parse_error: str | None
    result: Step | None = None


@dataclass
class TraceItem:
    step: Step
    calls: list[TraceCall]


def _pretty(parsed: Any) -> str | None:
    if parsed is None:
        return None
    return json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=False)


def trace_items(*, steps: Sequence[Step]) -> list[TraceItem]:
    """Steps in order, each tool result placed under the call that asked for it. A result
    whose call id matches no earlier call stays a step of its own, so nothing is hidden."""
    items: list[TraceItem] = []
    open_calls: dict[str, TraceCall] = {}
    for step in steps:
        if step.role == Step.Role.TOOL and step.tool_call_id in open_calls:
            open_calls.pop(step.tool_call_id).result = step
            continue
        calls = []
        for raw in step.tool_calls or []:
            raw = raw if isinstance(raw, dict) else {"arguments": str(raw)}
            call = TraceCall(
                id=str(raw.get("id") or ""),
                name=str(raw.get("name") or "?"),
                arguments=str(raw.get("arguments") or ""),
                pretty=_pretty(raw.get("parsed")),
                parse_error=raw.get("parse_error"),
            )
            if call.id:
                open_calls[call.id] = call
            calls.append(call)
        items.append(TraceItem(step=step, calls=calls))
    return items


def episodes_by_id(*, ids: Sequence[int]) -> dict[int, Episode]:
    """The episodes that exist among ``ids``, with their runs, in one query."""
    return Episode.objects.select_related("run").in_bulk(list(ids))


def first_episodes_of_task(
    *, run_ids: Sequence[int], task_id: str, trial: int | None = None
) -> dict[int, Episode]:
    """For each run, its attempt at ``task_id`` (the given trial, else the lowest), one query."""
    episodes = Episode.objects.filter(run_id__in=list(run_ids), task_id=task_id)
    if trial is not None:
        episodes = episodes.filter(trial=trial)
    found: dict[int, Episode] = {}
    for episode in episodes.select_related("run").order_by("run_id", "trial"):
        found.setdefault(episode.run_id, episode)
    return found


def steps_by_episode(*, episode_ids: Sequence[int]) -> dict[int, list[Step]]:
    """Each episode's steps in order, in one query (raw responses left behind)."""
    found: dict[int, list[Step]] = {pk: [] for pk in episode_ids}
    steps = Step.objects.filter(episode_id__in=list(found)).defer("raw_response")
    for step in steps.order_by("episode_id", "index"):
        found[step.episode_id].append(step)
    return found


def episode_other_attempts(*, episode: Episode, limit: int = 6) -> list[Episode]:
    """The latest other attempts at the same task (other runs and trials), for the compare
    links: one query on the task_id index, however many attempts exist."""
    return list(
        Episode.objects.filter(task_id=episode.task_id)
        .exclude(pk=episode.pk)
        .select_related("run")
        .only("id", "trial", "outcome", "run_id", "run__model_name", "run__suite_name")
        .order_by("-id")[:limit]
    )


# ---- the ingest wire shape, read back -------------------------------------------------------


def step_message(step: Step) -> dict[str, Any]:
    """A stored step as an OpenAI chat message (the EpisodeIn message shape, normalised: absent
    strings are "", absent tool calls []). Tool calls keep their raw arguments as sent."""
    tokens = (step.prompt_tokens, step.completion_tokens, step.reasoning_tokens)
    return {
        "role": step.role,
        "content": step.content,
        "reasoning_content": step.reasoning,
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in step.tool_calls
        ],
        "tool_call_id": step.tool_call_id,
        "name": step.tool_name,
        "is_error": step.is_error,
        "usage": None
        if all(t is None for t in tokens)
        else {
            "prompt_tokens": step.prompt_tokens or 0,
            "completion_tokens": step.completion_tokens or 0,
            "reasoning_tokens": step.reasoning_tokens or 0,
        },
        "latency_ms": step.latency_ms,
    }


def episode_check(episode: Episode) -> dict[str, Any] | None:
    """The check result, or None when the producer sent no expected/got/detail."""
    if not (episode.check_expected or episode.check_got or episode.check_detail):
        return None
    return {
        "passed": episode.outcome == Episode.Outcome.PASSED,
        "expected": episode.check_expected,
        "got": episode.check_got,
        "detail": episode.check_detail,
    }


def episode_export(*, episode: Episode, steps: list[Step]) -> dict[str, Any]:
    """An episode in the EpisodeIn shape, normalised as documented in the README: exporting an
    imported episode gives back what was sent."""
    return {
        "task_id": episode.task_id,
        "axis": episode.axis,
        "trial": episode.trial,
        "external_id": episode.external_id or None,
        "goal": episode.goal,
        "outcome": episode.outcome,
        "check": episode_check(episode),
        "final_answer": episode.final_answer,
        "error": episode.error,
        "optimal_calls": episode.optimal_calls,
        "stalled": episode.stalled,
        "wall_ms": episode.wall_ms,
        "messages": [step_message(step) for step in steps],
    }


def run_for_external_id(*, owner: Any, external_id: str) -> Run | None:
    owner_q = Q(triggered_by=owner) if owner is not None else Q(triggered_by__isnull=True)
    return (
        Run.objects.filter(owner_q, backend_config__external_id=external_id).order_by("id").first()
    )


def run_export(run: Run) -> dict[str, Any]:
    """A run in the RunIn shape (what an import of it was given)."""
    config = run.backend_config or {}
    return {
        "model": run.model_name,
        "suite": run.suite_name,
        "suite_version": run.suite_version,
        "suite_hash": run.suite_hash,
        "source": {"name": run.source_name, "version": run.source_version}
        if run.source_name or run.source_version
        else None,
        "sampling": config.get("sampling", {}),
        "metadata": run.metadata,
        "external_id": config.get("external_id"),
    }


def run_episodes_page(*, run: Run, limit: int, offset: int) -> list[Episode]:
    return list(
        Episode.objects.filter(run=run).order_by("trial", "task_id", "id")[offset : offset + limit]
    )


def verdicts_by_episode(*, episode_ids: list[int]) -> dict[int, list[Verdict]]:
    """Every verdict on these episodes, oldest first, in one query."""
    out: dict[int, list[Verdict]] = {pk: [] for pk in episode_ids}
    rows = (
        Verdict.objects.filter(episode_id__in=episode_ids)
        .select_related("reviewer", "step")
        .order_by("episode_id", "created_at", "id")
    )
    for verdict in rows:
        out[verdict.episode_id].append(verdict)
    return out


def run_verdicts(*, run: Run) -> QuerySet[Verdict]:
    return (
        Verdict.objects.filter(episode__run=run)
        .select_related("reviewer", "step")
        .order_by("episode_id", "created_at", "id")
    )


def import_job_status(*, job_id: str) -> dict[str, Any] | None:
    """An upload's import status (see traces.services.import_job_run), or None if unknown."""
    if not re.fullmatch(r"[0-9a-f]{32}", job_id):
        return None
    path = settings.VAR_DIR / "imports" / job_id / "status.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None

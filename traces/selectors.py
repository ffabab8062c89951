"""Reads and aggregates for traces."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from benchrig.harness.scoring import EpisodeOutcome, Summary, summarize
from traces.models import Episode, Run, Step


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

"""Reads and aggregates for traces."""

from __future__ import annotations

from collections.abc import Sequence

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

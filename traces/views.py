from __future__ import annotations

from collections import Counter

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from accounts.roles import reviewer_required
from traces.compare import CompareQueryError, EpisodePair, align, display_rows, parse_query
from traces.hazards import episode_hazards
from traces.models import Episode, Run, Step
from traces.selectors import (
    episode_steps,
    episodes_by_id,
    first_episodes_of_task,
    run_summary,
    steps_by_episode,
)
from traces.selectors import run_list as select_runs


@require_GET
@reviewer_required
def run_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(select_runs(), 50).get_page(request.GET.get("page"))
    return render(request, "traces/run_list.html", {"page": page})


@require_GET
@reviewer_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("backend"), pk=run_id)
    episodes = Episode.objects.filter(run=run).order_by("trial", "axis", "task_id")
    return render(
        request,
        "traces/run_detail.html",
        {"run": run, "summary": run_summary(run=run), "episodes": episodes},
    )


@require_GET
@reviewer_required
def episode_detail(request: HttpRequest, episode_id: int) -> HttpResponse:
    episode = get_object_or_404(Episode.objects.select_related("run"), pk=episode_id)
    return render(
        request,
        "traces/episode_detail.html",
        {"episode": episode, "steps": episode_steps(episode=episode)},
    )


@require_GET
@reviewer_required
def compare(request: HttpRequest) -> HttpResponse:
    try:
        query = parse_query(request.GET)
    except CompareQueryError as exc:
        return _compare_error(request, str(exc), status=400)
    if isinstance(query, EpisodePair):
        found = episodes_by_id(ids=[query.a, query.b])
        missing = [str(pk) for pk in (query.a, query.b) if pk not in found]
        if missing:
            return _compare_error(request, f"There is no episode {', '.join(missing)}.", 404)
        a, b = found[query.a], found[query.b]
        if a.task_id != b.task_id:
            return _compare_error(
                request,
                f"Episodes {a.pk} and {b.pk} are attempts at different tasks ({a.task_id}, "
                f"{b.task_id}); compare two attempts at the same task.",
                400,
            )
    else:
        found = first_episodes_of_task(
            run_ids=[query.run_a, query.run_b], task_id=query.task, trial=query.trial
        )
        trial = "" if query.trial is None else f" (trial {query.trial})"
        for run_id in (query.run_a, query.run_b):
            if run_id not in found:
                return _compare_error(
                    request, f"Run {run_id} has no attempt at task {query.task!r}{trial}.", 404
                )
        a, b = found[query.run_a], found[query.run_b]
    steps = steps_by_episode(episode_ids=[a.pk, b.pk])
    alignment = align(steps[a.pk], steps[b.pk])
    rows = display_rows(
        alignment,
        hazards_a=_hazard_titles(a, steps[a.pk]),
        hazards_b=_hazard_titles(b, steps[b.pk]),
    )
    counts = Counter(row.status for row in rows)
    return render(
        request,
        "traces/compare.html",
        {
            "a": a,
            "b": b,
            "rows": rows,
            "alignment": alignment,
            "counts": counts,
            # Reversed once, not once per cell: a 500-step pair has a thousand cells.
            "viewer_a": reverse("traces:episode_detail", args=[a.pk]),
            "viewer_b": reverse("traces:episode_detail", args=[b.pk]),
        },
    )


def _hazard_titles(episode: Episode, steps: list[Step]) -> dict[int, list[str]]:
    titles: dict[int, list[str]] = {}
    for hazard in episode_hazards(episode=episode, steps=steps):
        if hazard.step_index is not None:
            titles.setdefault(hazard.step_index, []).append(hazard.title)
    return titles


def _compare_error(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(
        request, "traces/compare.html", {"error": message, "params": request.GET}, status=status
    )

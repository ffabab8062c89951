from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from accounts.roles import reviewer_required
from traces.models import Episode, Run
from traces.selectors import episode_steps, run_summary
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

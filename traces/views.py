from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from accounts.roles import operator_required, reviewer_required
from traces.forms import TraceUploadForm
from traces.models import Episode, Run
from traces.selectors import episode_steps, import_job_status, run_summary
from traces.selectors import run_list as select_runs
from traces.services import import_job_create
from traces.tasks import import_job_task


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


@require_http_methods(["GET", "POST"])
@operator_required
def import_upload(request: HttpRequest) -> HttpResponse:
    """Upload a trace file; a worker imports it and the status page shows progress. Operators
    only: an import creates runs that appear on every leaderboard."""
    form = TraceUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        job_id = import_job_create(
            upload=upload.chunks(),
            name=upload.name,
            size=upload.size,
            fmt=form.cleaned_data["format"],
            owner=request.user,
        )
        import_job_task.delay_on_commit(job_id)
        return redirect("traces:import_status", job_id=job_id)
    status = 400 if request.method == "POST" else 200
    return render(request, "traces/import.html", {"form": form}, status=status)


@require_GET
@operator_required
def import_status(request: HttpRequest, job_id: str) -> HttpResponse:
    job = import_job_status(job_id=job_id)
    if job is None or job["owner_id"] != request.user.pk:
        raise Http404("no such import")
    context = {
        "job": job,
        "job_id": job_id,
        "percent": int(100 * job["bytes_read"] / job["size"]) if job["size"] else 100,
        "runs": Run.objects.filter(pk__in=job["runs"]).order_by("id"),
    }
    template = "traces/import_status.html"
    return render(request, template + "#status" if request.htmx else template, context)

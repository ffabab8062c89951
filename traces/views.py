from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import OPERATOR, has_role, operator_required, reviewer_required
from benchrig.harness.client import Sampling
from benchrig.harness.probe import ProbeResult, probe_backend
from traces import services
from traces.forms import BackendForm, RunForm
from traces.models import Backend, Episode, Run
from traces.selectors import (
    LIVE_STATUSES,
    episode_steps,
    run_episodes,
    run_progress,
    run_status_words,
    run_summary,
)
from traces.selectors import backend_list as select_backends
from traces.selectors import run_list as select_runs
from traces.services import (
    SAMPLING_FIELDS,
    backend_create,
    backend_delete,
    backend_update,
    run_create,
)

# A connection check runs inside a web request: never let a slow server hold it for minutes.
PROBE_TIMEOUT_CAP_S = 30.0


def _url_or_none(name: str, *args: object) -> str | None:
    """Links into pages other apps own (review queue, leaderboard) appear once those exist."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


@require_GET
@reviewer_required
def run_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(select_runs(), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "traces/run_list.html",
        {"page": page, "is_operator": has_role(request.user, OPERATOR)},
    )


def _run_live_context(request: HttpRequest, run: Run) -> dict[str, object]:
    queue = _url_or_none("traces:review_queue")
    return {
        "run": run,
        "live": run.status in LIVE_STATUSES,
        "progress": run_progress(run=run),
        "summary": run_summary(run=run),
        "episodes": run_episodes(run=run),
        "status_words": run_status_words(run=run),
        "queue_url": queue,
        "is_operator": has_role(request.user, OPERATOR),
    }


@require_GET
@reviewer_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("backend", "triggered_by"), pk=run_id)
    context = _run_live_context(request, run)
    context["leaderboard_url"] = _url_or_none("leaderboard:board", run.suite_name)
    return render(request, "traces/run_detail.html", context)


@require_GET
@reviewer_required
def run_live(request: HttpRequest, run_id: int) -> HttpResponse:
    """The polled fragment of the run page. HTTP 286 tells htmx to stop polling: the run is
    over and this is its final state."""
    run = get_object_or_404(Run.objects.select_related("backend", "triggered_by"), pk=run_id)
    context = _run_live_context(request, run)
    response = render(request, "traces/partials/run_live.html", context)
    if not context["live"] and request.htmx:
        response.status_code = 286
    return response


@require_http_methods(["GET", "POST"])
@operator_required
def run_new(request: HttpRequest) -> HttpResponse:
    initial = {"backend": request.GET.get("backend"), "suite": "agentic-v1"}
    form = RunForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        with transaction.atomic():
            run = run_create(
                backend=data["backend"],
                suite=data["suite"],
                trials=data["trials"],
                concurrency=data["concurrency"],
                sampling=form.sampling_values(),
                triggered_by=request.user,
            )
            services.run_enqueue(run=run)
        messages.success(request, f"Run #{run.pk} queued.")
        return redirect("traces:run_detail", run.pk)
    return render(
        request, "traces/run_new.html", {"form": form, "has_backends": Backend.objects.exists()}
    )


@require_POST
@operator_required
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id)
    try:
        run = services.run_cancel(run=run)
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run #{run.pk} cancelled; finished episodes are kept.")
    return redirect("traces:run_detail", run.pk)


@require_POST
@operator_required
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("backend"), pk=run_id)
    try:
        run = services.run_retry_errored(run=run)
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Errored episodes of run #{run.pk} queued again.")
    return redirect("traces:run_detail", run.pk)


@require_POST
@operator_required
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id)
    try:
        run = services.run_resume(run=run)
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run #{run.pk} resumed: what is left is queued again.")
    return redirect("traces:run_detail", run.pk)


@require_POST
@operator_required
def episode_rerun(request: HttpRequest, episode_id: int) -> HttpResponse:
    episode = get_object_or_404(Episode.objects.select_related("run__backend"), pk=episode_id)
    try:
        run = services.run_rerun_task(episode=episode, triggered_by=request.user)
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("traces:episode_detail", episode.pk)
    messages.success(request, f"Task {episode.task_id} queued as run #{run.pk}.")
    return redirect("traces:run_detail", run.pk)


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
@operator_required
def backend_list(request: HttpRequest) -> HttpResponse:
    return render(request, "traces/backend_list.html", {"backends": select_backends()})


def _apply_errors(form: BackendForm, exc: ValidationError) -> None:
    """A service-level ValidationError shown on the form's fields, like the form's own."""
    if hasattr(exc, "error_dict"):
        for field, errors in exc.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc)


# The API key arrives in POST: keep it (and every local below these views) off error pages.
@require_http_methods(["GET", "POST"])
@operator_required
@sensitive_post_parameters("api_key")
@sensitive_variables()
def backend_new(request: HttpRequest) -> HttpResponse:
    form = BackendForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            backend = backend_create(api_key=form.cleaned_data["api_key"], **form.settings())
        except ValidationError as exc:
            _apply_errors(form, exc)
        else:
            messages.success(request, f"Backend {backend.name} created.")
            return redirect("traces:backend_list")
    return render(request, "traces/backend_form.html", {"form": form, "backend": None})


@require_http_methods(["GET", "POST"])
@operator_required
@sensitive_post_parameters("api_key")
@sensitive_variables()
def backend_edit(request: HttpRequest, backend_id: int) -> HttpResponse:
    backend = get_object_or_404(Backend, pk=backend_id)
    form = BackendForm(request.POST or None, instance=backend)
    if request.method == "POST" and form.is_valid():
        try:
            backend_update(
                backend=Backend.objects.get(pk=backend.pk),
                api_key=form.cleaned_data["api_key"] or None,
                clear_api_key=form.cleaned_data.get("clear_api_key", False),
                **form.settings(),
            )
        except ValidationError as exc:
            _apply_errors(form, exc)
        else:
            messages.success(request, f"Backend {form.cleaned_data['name']} saved.")
            return redirect("traces:backend_list")
    # A rejected POST leaves the ModelForm's instance holding the bad values; show the stored ones.
    backend.refresh_from_db()
    return render(request, "traces/backend_form.html", {"form": form, "backend": backend})


@require_http_methods(["GET", "POST"])
@operator_required
def backend_delete_view(request: HttpRequest, backend_id: int) -> HttpResponse:
    backend = get_object_or_404(Backend, pk=backend_id)
    if request.method == "POST":
        name = backend.name
        kept = backend_delete(backend=backend)
        messages.success(
            request, f"Backend {name} deleted; its {kept} run(s) are kept with their settings."
        )
        return redirect("traces:backend_list")
    n_runs = Run.objects.filter(backend=backend).count()
    return render(
        request, "traces/backend_confirm_delete.html", {"backend": backend, "n_runs": n_runs}
    )


def _render_probe(request: HttpRequest, result: ProbeResult) -> HttpResponse:
    return render(request, "traces/partials/probe_result.html", {"result": result})


@require_POST
@operator_required
@sensitive_variables()
def backend_probe(request: HttpRequest, backend_id: int) -> HttpResponse:
    """Test a saved backend's connection with its stored settings and key."""
    backend = get_object_or_404(Backend, pk=backend_id)
    sampling = Sampling(
        **{f: getattr(backend, f) for f in SAMPLING_FIELDS if getattr(backend, f) != ""},
        extra_body=backend.extra_body or {},
    )
    result = probe_backend(
        base_url=backend.base_url,
        model=backend.model,
        api_key=backend.api_key,
        sampling=sampling,
        timeout_s=min(backend.timeout_s, PROBE_TIMEOUT_CAP_S),
    )
    return _render_probe(request, result)


@require_POST
@operator_required
@sensitive_post_parameters("api_key")
@sensitive_variables()
def backend_probe_draft(request: HttpRequest) -> HttpResponse:
    """Test the settings typed into the backend form, before saving them. On the edit form a
    blank key means the stored one, as saving would."""
    stored = None
    if request.POST.get("backend"):
        stored = get_object_or_404(Backend, pk=request.POST["backend"])
    form = BackendForm(request.POST, instance=stored)
    form.is_valid()
    # The connection does not depend on the name or the concurrency: don't block on those.
    relevant = {k: v for k, v in form.errors.items() if k not in ("name", "max_concurrency")}
    if relevant:
        return render(
            request, "traces/partials/probe_result.html", {"result": None, "errors": relevant}
        )
    data = form.cleaned_data
    api_key = data.get("api_key") or ""
    if stored is not None and not api_key and not data.get("clear_api_key"):
        api_key = Backend.objects.values_list("api_key", flat=True).get(pk=stored.pk)
    result = probe_backend(
        base_url=data["base_url"],
        model=data["model"],
        api_key=api_key,
        sampling=form.sampling(),
        timeout_s=min(data["timeout_s"], PROBE_TIMEOUT_CAP_S),
    )
    return _render_probe(request, result)

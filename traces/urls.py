from __future__ import annotations

from django.urls import path

from traces import views

app_name = "traces"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/live/", views.run_live, name="run_live"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/retry/", views.run_retry, name="run_retry"),
    path("runs/<int:run_id>/resume/", views.run_resume, name="run_resume"),
    path("episodes/<int:episode_id>/", views.episode_detail, name="episode_detail"),
    path("episodes/<int:episode_id>/rerun/", views.episode_rerun, name="episode_rerun"),
    path("backends/", views.backend_list, name="backend_list"),
    path("backends/new/", views.backend_new, name="backend_new"),
    path("backends/probe/", views.backend_probe_draft, name="backend_probe_draft"),
    path("backends/<int:backend_id>/edit/", views.backend_edit, name="backend_edit"),
    path("backends/<int:backend_id>/delete/", views.backend_delete_view, name="backend_delete"),
    path("backends/<int:backend_id>/probe/", views.backend_probe, name="backend_probe"),
    path("review/", views.review_queue, name="review_queue"),
    path("episodes/<int:episode_id>/verdicts/", views.episode_verdict, name="episode_verdict"),
    path("compare/", views.compare, name="compare"),
    path("import/", views.import_upload, name="import_upload"),
    path("import/<str:job_id>/", views.import_status, name="import_status"),
]

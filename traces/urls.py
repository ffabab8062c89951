from __future__ import annotations

from django.urls import path

from traces import views

app_name = "traces"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("episodes/<int:episode_id>/", views.episode_detail, name="episode_detail"),
    path("import/", views.import_upload, name="import_upload"),
    path("import/<str:job_id>/", views.import_status, name="import_status"),
]

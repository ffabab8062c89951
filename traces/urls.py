from __future__ import annotations

from django.urls import path

from traces import views

app_name = "traces"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("review/", views.review_queue, name="review_queue"),
    path("episodes/<int:episode_id>/", views.episode_detail, name="episode_detail"),
    path("episodes/<int:episode_id>/verdicts/", views.episode_verdict, name="episode_verdict"),
    path("compare/", views.compare, name="compare"),
]

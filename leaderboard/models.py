"""Share links: a frozen leaderboard view under a stable slug, readable without login."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ShareLink(models.Model):
    """A leaderboard view frozen at the moment "Share" was pressed.

    The run ids are frozen too, so the link keeps showing the same runs after new ones land.
    """

    class View(models.TextChoices):
        RAW = "raw"
        ADJUSTED = "adjusted"

    class TokenMode(models.TextChoices):
        FULL = "full", "full credit"
        RELATIVE = "relative", "relative to the leanest row"

    class Grouping(models.TextChoices):
        RUN = "run", "one row per run"
        LATEST = "latest", "latest run per configuration"

    slug = models.SlugField(max_length=32, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    suite_name = models.CharField(max_length=100)
    suite_version = models.CharField(max_length=50)
    suite_hash = models.CharField(max_length=64)
    run_ids = models.JSONField(default=list)
    view = models.CharField(max_length=10, choices=View.choices, default=View.RAW)
    sort = models.CharField(max_length=60, default="-score")
    token_mode = models.CharField(max_length=10, choices=TokenMode.choices, default=TokenMode.FULL)
    grouping = models.CharField(max_length=10, choices=Grouping.choices, default=Grouping.RUN)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(view__in=["raw", "adjusted"]), name="sharelink_view_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.slug}: {self.title}"

"""Reads for accounts."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from accounts.models import ApiToken


def api_tokens_of(*, owner: AbstractBaseUser) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(owner=owner).order_by("-created_at", "-id")

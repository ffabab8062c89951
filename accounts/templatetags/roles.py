"""`{% if user|has_role:"operator" %}` in templates: the same rule as the view decorators."""

from __future__ import annotations

from typing import Any

from django import template

from accounts.roles import has_role as _has_role

register = template.Library()


@register.filter
def has_role(user: Any, role: str) -> bool:
    return _has_role(user, role)

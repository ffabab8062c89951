"""Small display filters for the reviewer UI."""

from __future__ import annotations

from django import template

from accounts import roles

register = template.Library()


@register.filter
def spaced(value: str) -> str:
    """``model_error`` → ``model error``: stored codes read as words."""
    return str(value).replace("_", " ")


@register.filter
def has_role(user: object, role: str) -> bool:
    """``{% if user|has_role:"reviewer" %}``: the same check the views' decorators make."""
    return roles.has_role(user, role)

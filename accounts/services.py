"""Writes for accounts."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.db import transaction

from accounts.roles import ROLES


def user_create(*, username: str, password: str, role: str | None, email: str = "") -> User:
    if role is not None and role not in ROLES:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    if User.objects.filter(username=username).exists():
        raise ValueError(f"user {username!r} already exists")
    with transaction.atomic():
        user = User.objects.create_user(username=username, password=password, email=email)
        if role is not None:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user

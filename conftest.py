"""Shared fixtures: the personas every view test speaks as."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client


def _member(username: str, *groups: str) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def anonymous() -> Client:
    return Client()


@pytest.fixture
def reviewer(db: None) -> Client:
    client = Client()
    client.force_login(_member("rita", "reviewer"))
    return client


@pytest.fixture
def operator(db: None) -> Client:
    client = Client()
    client.force_login(_member("otto", "reviewer", "operator"))
    return client


@pytest.fixture
def live_database_url(transactional_db: None) -> str:
    """A DATABASE_URL for subprocesses (CLI, workers) that points at the test database."""
    from django.db import connection

    cfg = connection.settings_dict
    if cfg["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{cfg['NAME']}"
    user = cfg.get("USER") or "postgres"
    auth = f"{user}:{cfg['PASSWORD']}@" if cfg.get("PASSWORD") else f"{user}@"
    return (
        f"postgres://{auth}{cfg.get('HOST') or '127.0.0.1'}:{cfg.get('PORT') or 5432}/{cfg['NAME']}"
    )

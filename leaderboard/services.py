"""Writes for leaderboards: creating and revoking share links."""

from __future__ import annotations

import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from leaderboard.models import ShareLink
from leaderboard.selectors import BoardError, BoardQuery, board_build

TITLE_MAX = 200


def share_create(
    *, owner: AbstractBaseUser, query: BoardQuery, title: str = "", description: str = ""
) -> ShareLink:
    """Freeze the board as it is now: the runs it shows are stored by id, so later runs never
    join a published link."""
    title = title.strip()
    if len(title) > TITLE_MAX:
        raise BoardError(f"title is {len(title)} characters; at most {TITLE_MAX}")
    board = board_build(query)
    if not board.rows:
        raise BoardError("this board has no runs to share")
    best = board.rows[0]
    default_title = f"{query.suite} {query.version} leaderboard ({query.view})"
    default_description = (
        f"{len(board.rows)} runs on {query.suite} {query.version}; "
        f"top: {best.label} at {best.score:.1f} Agentic Score, {100 * best.success:.1f}% success."
    )
    for _ in range(5):  # a slug collision is astronomically rare; retry rather than fail
        try:
            with transaction.atomic():
                return ShareLink.objects.create(
                    slug=secrets.token_urlsafe(9),
                    owner=owner,
                    suite_name=query.suite,
                    suite_version=query.version,
                    suite_hash=query.suite_hash,
                    run_ids=board.run_ids,
                    view=query.view,
                    sort=query.sort,
                    token_mode=query.token_mode,
                    grouping=query.grouping,
                    title=title or default_title,
                    description=description.strip() or default_description,
                )
        except IntegrityError:
            continue
    raise RuntimeError("could not find a free share slug")


def share_revoke(*, link: ShareLink, user: AbstractBaseUser) -> ShareLink:
    """Only the owner revokes; the slug then answers 404 for good."""
    if link.owner_id != user.pk:
        raise PermissionDenied("only the owner of a share link can revoke it")
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
    return link

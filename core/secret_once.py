"""A new secret (an API secret, a webhook signing secret) waits in the session for the one
dashboard page that shows it (post/redirect/get).

The session row lives in the database, and its backups, up to DASHBOARD_SESSION_SECONDS if the
redirect is never followed: the secret is kept there encrypted, with the signing secrets' key
(core.secrets_at_rest, WEBHOOK_SECRETS_KEYS), and shown only within SECRET_ONCE_SECONDS."""

import contextlib
import time

from django.http import HttpRequest

from core import secrets_at_rest

# Time enough to follow a redirect, even slowly; after it the secret is never shown.
SECRET_ONCE_SECONDS = 300
SESSION_KEY = "cowry_secrets_held"  # a new name: the old one held secrets in clear


def hold(request: HttpRequest, *, kind: str, object_id: object, secret: str) -> None:
    """Keep `secret` for the next page that takes it: encrypted, for SECRET_ONCE_SECONDS."""
    held = _unexpired(request)
    held[f"{kind}:{object_id}"] = {
        "token": secrets_at_rest.encrypt(secret),
        "until": time.time() + SECRET_ONCE_SECONDS,
    }
    request.session[SESSION_KEY] = held


def take(request: HttpRequest, *, kind: str, object_id: object) -> str | None:
    """The secret held for this object, once; None when none is held (any more)."""
    return _take(request, kind=kind, object_id=str(object_id)).get(str(object_id))


def take_each(request: HttpRequest, *, kind: str) -> dict[str, str]:
    """Every secret held for objects of `kind`, by object id, once."""
    return _take(request, kind=kind, object_id=None)


def _take(request: HttpRequest, *, kind: str, object_id: str | None) -> dict[str, str]:
    """Removes the matching unexpired secrets from the session (expired ones go too)."""
    held, taken = _unexpired(request), {}
    for slot in list(held):
        held_kind, held_id = slot.split(":", 1)
        if held_kind == kind and object_id in (None, held_id):
            token = held.pop(slot)["token"]
            # A token whose key was removed meanwhile is as good as expired.
            with contextlib.suppress(secrets_at_rest.UnreadableSecret):
                taken[held_id] = secrets_at_rest.decrypt(token)
    if held:
        request.session[SESSION_KEY] = held
    else:
        request.session.pop(SESSION_KEY, None)
    return taken


def _unexpired(request: HttpRequest) -> dict[str, dict]:
    now = time.time()
    held = request.session.get(SESSION_KEY) or {}
    return {slot: entry for slot, entry in held.items() if entry["until"] > now}

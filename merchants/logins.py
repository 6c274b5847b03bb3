"""Dashboard logins: failed attempts counted per username and per client address in the shared
Redis, so every web worker shares one count (docs/decisions.md, "Dashboard logins are
throttled").

Each attempt whose password is to be checked first takes one count on both counters, in one
atomic step that refuses it, counting nothing, when either is at its limit: attempts sent at
once cannot all be checked before the first failure is counted. A success gives its count back:
the username's counter is cleared (its owner knows the password), the address's loses only that
one count (the failures of others behind the same address stay). Each counted attempt sets its
counters to expire LOGIN_FAILURE_WINDOW_SECONDS later, so a lock lifts on its own that long
after the last failure it counted; refused attempts do not push it further.

When Redis cannot be reached, logins are checked without counting (fail open, logged at ERROR):
an outage of the counter must not lock support and ops out of the dashboard when they need it
most. Every failed and refused attempt is logged at WARNING (username tried, address; never the
password)."""

import hashlib
import ipaddress
import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from redis.exceptions import RedisError
from unfold.forms import AuthenticationForm

from core import shared_cache

logger = logging.getLogger("cowry")

# Take one count on each counter unless one is at its limit (KEYS: username, address;
# ARGV: their limits, the window). 1: counted, the password may be checked; 0: refused.
_ATTEMPT_SCRIPT = """
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i]) then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[3])
end
return 1
"""
# A success: the username's failures are forgotten, the address gives back this attempt's count.
_SUCCESS_SCRIPT = """
redis.call('DEL', KEYS[1])
if redis.call('GET', KEYS[2]) then redis.call('DECR', KEYS[2]) end
return 1
"""
_scripts: dict[tuple[int, str], object] = {}


def client_address(request: HttpRequest) -> str:
    """The address the request came from: REMOTE_ADDR, unless TRUSTED_PROXY_COUNT proxies
    (load balancers) in front of the web process each append the address they were reached
    from to X-Forwarded-For: then the entry that many places from the right, which the
    nearest untrusted hop cannot forge."""
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    hops = settings.TRUSTED_PROXY_COUNT
    if not hops:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < hops:
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-hops]))
    except ValueError:
        return remote


def _address_group(address: str) -> str:
    """An IPv6 client has a /64 to pick addresses from: it is counted as one address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def counter_names(*, username: str, address: str) -> tuple[str, str]:
    """The counters' cache names: the username case-folded (and hashed: it is whatever was
    typed), the address (an IPv6 one by its /64)."""
    folded = hashlib.sha256(username.casefold().encode()).hexdigest()[:32]
    return (
        f"login-failures:username:{folded}",
        f"login-failures:address:{_address_group(address)}",
    )


def _script(client, source: str):
    script = _scripts.get((id(client), source))
    if script is None:
        script = _scripts[(id(client), source)] = client.register_script(source)
    return script


def _throttling_off() -> None:
    if shared_cache.redis_failed():
        logger.error(
            "Dashboard login throttling is OFF for %ss: Redis is unreachable, failed logins"
            " are not counted",
            shared_cache.REDIS_PAUSE_SECONDS,
        )


def attempt_allowed(*, username: str, address: str) -> bool:
    """Count this login attempt, or refuse it (False) when its username or address is at its
    limit of failures within the window. True without counting when Redis is away."""
    keys = counter_names(username=username, address=address)
    limits = [settings.LOGIN_FAILURES_PER_USERNAME, settings.LOGIN_FAILURES_PER_ADDRESS]
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    client = shared_cache.redis_client()
    if client is None:  # embedded mode: this process's memory
        stored = cache.get_many(keys)
        if any(stored.get(key, 0) >= limit for key, limit in zip(keys, limits, strict=True)):
            return False
        cache.set_many({key: stored.get(key, 0) + 1 for key in keys}, timeout=window)
        return True
    if shared_cache.redis_paused():
        return True
    try:
        counted = _script(client, _ATTEMPT_SCRIPT)(
            keys=[shared_cache.cache_key(key) for key in keys], args=[*limits, window]
        )
    except RedisError:
        _throttling_off()
        return True
    return bool(counted)


def attempt_succeeded(*, username: str, address: str) -> None:
    keys = counter_names(username=username, address=address)
    client = shared_cache.redis_client()
    if client is None:
        cache.delete(keys[0])
        left = cache.get(keys[1])
        if left:
            cache.set(keys[1], left - 1, timeout=settings.LOGIN_FAILURE_WINDOW_SECONDS)
        return
    if shared_cache.redis_paused():
        return
    try:
        _script(client, _SUCCESS_SCRIPT)(keys=[shared_cache.cache_key(key) for key in keys])
    except RedisError:  # the counts expire on their own
        _throttling_off()


def login_unlock(*, username: str, address: str = "") -> dict[str, int]:
    """Forget the failures counted for `username` (any case) and, when given, for `address`
    (ops: `unlock_login`), so the next attempt is checked at once. The failures each counter
    held, by "username" and "address" (0: none, or the window had passed)."""
    username_key, address_key = counter_names(username=username, address=address or "-")
    keys = {"username": username_key, **({"address": address_key} if address else {})}
    client = shared_cache.redis_client()
    if client is None:  # embedded mode: this process's memory
        held = cache.get_many(list(keys.values()))
        cache.delete_many(list(keys.values()))
        return {what: int(held.get(key, 0)) for what, key in keys.items()}
    stored = {what: shared_cache.cache_key(key) for what, key in keys.items()}
    with client.pipeline() as pipe:  # MULTI: nothing counted between the read and the delete
        for key in stored.values():
            pipe.get(key)
        pipe.delete(*stored.values())
        *held, _ = pipe.execute()
    return {what: int(count or 0) for what, count in zip(stored, held, strict=True)}


def logged_username(username: str) -> str:
    """The username as a login's log line shows it: quoted when it is a user's; otherwise only
    its length, since a name that is nobody's is often a password typed in the wrong field."""
    user_model = get_user_model()
    if user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).exists():
        return repr(username)
    return f"unknown ({len(username)} characters)"


class DashboardLoginForm(AuthenticationForm):
    """The admin's login form, throttled: over the limit, the attempt is refused before the
    password is checked, with one message whether or not the username exists."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": (
            "Too many failed logins. For your security, logging in is paused for a while:"
            " try again in %(minutes)s minutes, or ask your account owner or Cowry support"
            " to reset your password."
        ),
    }

    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()  # a field is missing: no password is checked
        address = client_address(self.request)
        if not attempt_allowed(username=username, address=address):
            logger.warning(
                "Dashboard login refused, too many failures: username %s from %s",
                logged_username(username),
                address,
            )
            minutes = max(1, round(settings.LOGIN_FAILURE_WINDOW_SECONDS / 60))
            raise ValidationError(
                self.error_messages["throttled"], code="throttled", params={"minutes": minutes}
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            logger.warning(
                "Dashboard login failed: username %s from %s", logged_username(username), address
            )
            raise
        attempt_succeeded(username=username, address=address)
        logger.info("Dashboard login: username %r from %s", username, address)
        return cleaned

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from merchants import services
from merchants.models import ApiKey, MerchantStatus
from tests.factories import CustomerFactory

pytestmark = pytest.mark.django_db


def _get(headers: dict, path: str = "/customers/00000000-0000-0000-0000-000000000000"):
    client = APIClient()
    return client.get(
        path, **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    )


def _assert_unauthorized(response) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'ApiKey realm="cowry"'  # RFC 9110 15.5.2
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.json()["error"]["message"]


def test_request_without_any_credential_is_401():
    _assert_unauthorized(_get({}))


def test_request_with_key_but_no_secret_is_401(merchant):
    issued = services.api_key_create(merchant=merchant)
    _assert_unauthorized(_get({"X-Api-Key": issued.api_key.key}))


def test_request_with_secret_but_no_key_is_401(merchant):
    issued = services.api_key_create(merchant=merchant)
    _assert_unauthorized(_get({"X-Api-Secret": issued.secret}))


def test_unknown_key_is_401():
    _assert_unauthorized(_get({"X-Api-Key": "ck_unknown", "X-Api-Secret": "cs_whatever"}))


def test_wrong_secret_is_401(merchant):
    issued = services.api_key_create(merchant=merchant)
    _assert_unauthorized(
        _get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret + "x"})
    )


def test_another_keys_secret_is_401(merchant):
    first = services.api_key_create(merchant=merchant)
    second = services.api_key_create(merchant=merchant)
    _assert_unauthorized(_get({"X-Api-Key": first.api_key.key, "X-Api-Secret": second.secret}))


def test_expired_key_is_401(merchant):
    issued = services.api_key_create(
        merchant=merchant, expires_at=timezone.now() - timedelta(seconds=1)
    )
    _assert_unauthorized(_get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}))


def test_revoked_key_is_401_at_once(merchant):
    issued = services.api_key_create(merchant=merchant)
    headers = {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}
    customer = CustomerFactory(merchant=merchant)
    assert _get(headers, f"/customers/{customer.id}").status_code == 200

    services.api_key_revoke(key=issued.api_key.key)

    _assert_unauthorized(_get(headers, f"/customers/{customer.id}"))


def test_a_revoked_key_in_use_is_logged_with_its_merchant_once_a_minute(merchant, caplog):
    """An operator asked "why do all our calls fail?" finds the key and merchant in the logs;
    a client retrying in a loop is not a line a request."""
    issued = services.api_key_create(merchant=merchant)
    headers = {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}
    services.api_key_revoke(key=issued.api_key.key)
    caplog.set_level("WARNING", logger="cowry")
    for _ in range(3):
        _assert_unauthorized(_get(headers))
    _get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret + "wrong"})

    assert [r.getMessage() for r in caplog.records if r.name == "cowry"] == [
        f"API key {issued.api_key.pk} of merchant {merchant.pk} refused: This API key has been"
        " revoked. (logged once a minute per key)"
    ]


def test_suspended_merchant_is_401(merchant):
    issued = services.api_key_create(merchant=merchant)
    merchant.status = MerchantStatus.SUSPENDED
    merchant.save()
    _assert_unauthorized(_get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}))


def test_secret_is_stored_only_as_a_hash(merchant):
    issued = services.api_key_create(merchant=merchant)
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    assert issued.secret not in stored.secret_hash
    assert stored.secret_hash != issued.secret
    assert len(stored.secret_hash) == 64


def test_valid_credentials_record_last_use(merchant):
    issued = services.api_key_create(merchant=merchant)
    customer = CustomerFactory(merchant=merchant)
    response = _get(
        {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret},
        f"/customers/{customer.id}",
    )
    assert response.status_code == 200
    assert ApiKey.objects.get(pk=issued.api_key.pk).last_used_at is not None


def test_failed_authentication_never_logs_the_secret(merchant, caplog):
    issued = services.api_key_create(merchant=merchant)
    with caplog.at_level("DEBUG"):
        _get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret + "wrong"})
        _get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret})
    assert issued.secret not in caplog.text


def test_an_unknown_key_does_the_work_of_a_known_key_with_a_wrong_secret(merchant, monkeypatch):
    """So the time a 401 takes does not tell which keys exist (counted, not timed: the work a
    hit does beside its one read is comparing one hash)."""
    from merchants import secrets as key_secrets

    work: list[str] = []
    original_matches = key_secrets.secret_matches

    def secret_matches(secret, secret_hash):
        work.append("hash compared")
        return original_matches(secret, secret_hash)

    known = services.api_key_create(merchant=merchant).api_key.key
    monkeypatch.setattr(key_secrets, "secret_matches", secret_matches)
    done = {}
    for label, key in (("unknown", "ck_" + "0" * 32), ("wrong secret", known)):
        work.clear()
        with pytest.raises(services.InvalidCredentials):
            services.api_key_authenticate(key=key, secret="cs_wrong")
        done[label] = work[:]
    assert done["unknown"] == done["wrong secret"] == ["hash compared"]


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("{key}\x00", "{secret}"),  # PostgreSQL refuses NUL in text: was a 500
        ("ck_\udcff", "{secret}"),  # not UTF-8 encodable: was a 500
        ("{key}", "{secret}\udcff"),
        ("ck_\xff\xe9", "{secret}"),  # header bytes outside ASCII, as a WSGI server decodes them
        ("{key}", "{secret}\xe9"),
        ("ck_" + "a" * 100_000, "{secret}"),
        ("{key}", "cs_" + "a" * 100_000),
    ],
)
def test_credentials_no_key_could_have_are_a_clean_401(merchant, key, secret):
    """gunicorn refuses control characters in a header and decodes the rest as Latin-1, but
    the API must not rest on the server in front of it for a 401."""
    issued = services.api_key_create(merchant=merchant)
    key = key.format(key=issued.api_key.key)
    secret = secret.format(secret=issued.secret)
    _assert_unauthorized(_get({"X-Api-Key": key, "X-Api-Secret": secret}))


def test_a_key_stops_working_at_its_expires_at_not_after(merchant):
    expires_at = timezone.now() + timedelta(hours=1)
    issued = services.api_key_create(merchant=merchant, expires_at=expires_at)
    credentials = {"key": issued.api_key.key, "secret": issued.secret}
    last_moment = expires_at - timedelta(microseconds=1)
    assert services.api_key_authenticate(**credentials, now=last_moment).pk == issued.api_key.pk
    with pytest.raises(services.InvalidCredentials, match="expired"):
        services.api_key_authenticate(**credentials, now=expires_at)


def _working(headers: dict, customer) -> bool:
    return _get(headers, f"/customers/{customer.id}").status_code == 200


def test_a_cached_key_suspended_merchant_is_401_at_once(merchant):
    """The key is cached with its merchant after the first request: suspending the merchant
    (a save, as the dashboard makes it) drops it."""
    issued = services.api_key_create(merchant=merchant)
    headers = {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}
    customer = CustomerFactory(merchant=merchant)
    assert _working(headers, customer) and _working(headers, customer)

    merchant.status = MerchantStatus.SUSPENDED
    merchant.save()

    _assert_unauthorized(_get(headers, f"/customers/{customer.id}"))


def test_a_rotated_key_with_no_grace_stops_at_once_and_its_replacement_works(merchant):
    issued = services.api_key_create(merchant=merchant)
    headers = {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}
    customer = CustomerFactory(merchant=merchant)
    assert _working(headers, customer)

    new = services.api_key_rotate(
        api_key_id=issued.api_key.pk, actor=None, grace=timedelta(0), now=timezone.now()
    )

    _assert_unauthorized(_get(headers, f"/customers/{customer.id}"))
    assert _working({"X-Api-Key": new.api_key.key, "X-Api-Secret": new.secret}, customer)


def test_the_cache_is_dropped_again_when_the_change_commits(
    merchant, django_capture_on_commit_callbacks
):
    """A request that read the key before a revocation committed may have cached it again: the
    drop runs once more at the commit."""
    issued = services.api_key_create(merchant=merchant)
    headers = {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}
    customer = CustomerFactory(merchant=merchant)
    with django_capture_on_commit_callbacks(execute=True):
        services.api_key_revoke(key=issued.api_key.key)
        ApiKey.objects.filter(pk=issued.api_key.pk).update(revoked_at=None)
        assert _working(headers, customer)  # the racing request, which cached the key
        ApiKey.objects.filter(pk=issued.api_key.pk).update(revoked_at=timezone.now())

    _assert_unauthorized(_get(headers, f"/customers/{customer.id}"))


def test_a_change_made_by_hand_is_seen_within_the_cache_lifetime(merchant, monkeypatch):
    """A revocation written in SQL (no model save to drop the cache) is seen within
    API_KEY_CACHE_SECONDS."""
    monkeypatch.setattr(services, "API_KEY_CACHE_SECONDS", 1)
    issued = services.api_key_create(merchant=merchant)
    headers = {"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}
    customer = CustomerFactory(merchant=merchant)
    assert _working(headers, customer)

    ApiKey.objects.filter(pk=issued.api_key.pk).update(revoked_at=timezone.now())
    assert _working(headers, customer)  # cached: the bound, not at once
    time.sleep(1.1)

    _assert_unauthorized(_get(headers, f"/customers/{customer.id}"))


def test_a_cached_key_still_needs_its_secret(merchant):
    issued = services.api_key_create(merchant=merchant)
    customer = CustomerFactory(merchant=merchant)
    assert _working({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret}, customer)

    _assert_unauthorized(
        _get({"X-Api-Key": issued.api_key.key, "X-Api-Secret": issued.secret + "x"})
    )

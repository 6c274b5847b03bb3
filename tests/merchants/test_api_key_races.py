"""Staff racing on one API key (double clicks, two tabs): one rotation, one revocation."""

import threading

import pytest
from django.db import connection

from core.exceptions import DomainError
from merchants import services
from merchants.models import ApiKey, AuditLogEntry
from tests.factories import MerchantFactory


def _together(action, count: int = 4) -> list[object]:
    """Run action() in `count` threads released at once; each result or DomainError."""
    barrier = threading.Barrier(count)
    results: list[object] = []

    def run():
        barrier.wait()
        try:
            results.append(action())
        except DomainError as exc:
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_racing_rotations_of_one_key_make_exactly_one_new_key():
    merchant = MerchantFactory()
    old = services.api_key_create(merchant=merchant)

    results = _together(lambda: services.api_key_rotate(api_key_id=old.api_key.pk, actor=None))

    assert sum(not isinstance(r, DomainError) for r in results) == 1
    assert {r.reason for r in results if isinstance(r, DomainError)} == {"api_key_already_rotated"}
    assert ApiKey.objects.filter(merchant=merchant).count() == 2
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.rotated").count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_revocations_of_one_key_are_recorded_once():
    merchant = MerchantFactory()
    issued = services.api_key_create(merchant=merchant)

    results = _together(
        lambda: services.api_key_revoke_by(api_key_id=issued.api_key.pk, actor=None)
    )

    assert sum(not isinstance(r, DomainError) for r in results) == 1
    assert AuditLogEntry.objects.filter(merchant=merchant, action="api_key.revoked").count() == 1

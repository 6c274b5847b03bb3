# ruff: noqa: E402, S106 - a harness: Django set up before the models; a dummy stored secret
"""The measurement behind webhooks.services.events.DELIVERIES_FAN_OUT: an event's fan-out to
its subscribed endpoints through the ORM (a read of the endpoints, a bulk insert) against the
one statement, in turn, each timed alone inside its event's transaction.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test_cowry N=2000 \\
        .venv/bin/python bench/webhook_fan_out.py

Run against a migrated (test) database; everything is rolled back at the end."""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django

django.setup()
from django.db import transaction
from django.utils import timezone

from merchants.models import Merchant
from webhooks.models import Delivery, WebhookEndpoint
from webhooks.services import events

N = int(os.environ.get("N", "2000"))


class Rollback(Exception):
    pass


def fan_out_orm(event) -> list:
    endpoints = WebhookEndpoint.objects.filter(
        merchant_id=event.merchant_id, enabled=True
    ).order_by("created_at", "id")
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(event=event, endpoint=endpoint, **events.due_now(event.created_at))
            for endpoint in endpoints
            if endpoint.subscribed_to(event.event_type)
        ]
    )
    events.deliveries_enqueue_after_commit(d.pk for d in deliveries)
    return [d.pk for d in deliveries]


def fan_out_sql(event) -> list:
    return events.deliveries_fan_out(event=event)


def timed(fan_out, merchant, n: int) -> float:
    event = events.event_new(
        merchant_id=merchant.pk,
        event_type="payin.completed",
        data_type="payin",
        data_id=merchant.pk,
        data_object={"id": str(n)},
        at=timezone.now(),
    )
    with transaction.atomic():
        event.save(force_insert=True)
        start = time.perf_counter()
        fan_out(event)
        return time.perf_counter() - start


def main() -> None:
    try:
        with transaction.atomic():
            merchant = Merchant.objects.create(name="bench")
            now = timezone.now()
            for types in ([], ["payout.failed"]):  # one subscribed, one not
                WebhookEndpoint.objects.create(
                    merchant=merchant,
                    url="https://hooks.example.com/cowry",
                    signing_secret="x",
                    event_types=types,
                    delivery_settings_changed_at=now,
                    created_at=now,
                    updated_at=now,
                )
            results: dict[str, list[float]] = {"orm": [], "sql": []}
            for n in range(N):
                results["orm"].append(timed(fan_out_orm, merchant, n))
                results["sql"].append(timed(fan_out_sql, merchant, n))
            for name, times in results.items():
                print(f"fan-out {name}: median {statistics.median(times) * 1e6:.0f} us over {N}")
            factor = statistics.median(results["orm"]) / statistics.median(results["sql"])
            print(f"factor (median): {factor:.1f}x")
            raise Rollback
    except Rollback:
        pass


main()

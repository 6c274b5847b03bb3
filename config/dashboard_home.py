"""The dashboard's home page for merchant staff: a summary across the apps (wiring)."""

from datetime import datetime, time
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from merchants.models import Merchant
from payments.models import Payin, Payout, Wallet
from transfers.models import Transfer
from webhooks.models import Delivery


def dashboard_summary(*, merchant: Merchant, now: datetime | None = None) -> dict[str, Any]:
    """What a merchant's staff see first: balances, today's payments by status, failing
    webhook deliveries. Reads only."""

    now = now or timezone.now()
    day_start = timezone.make_aware(datetime.combine(timezone.localdate(now), time.min))

    def by_status(model) -> list[dict[str, Any]]:
        rows = (
            model.objects.filter(merchant=merchant, created_at__gte=day_start)
            .values("status")
            .annotate(count=Count("id"))
            .order_by("status")
        )
        return list(rows)

    return {
        "balances": list(
            Wallet.objects.filter(merchant=merchant)
            .order_by("currency")
            .values("currency", "available", "reserved")
        ),
        "today": [
            ("Payins", "payments/payin", by_status(Payin)),
            ("Payouts", "payments/payout", by_status(Payout)),
            ("Transfers", "transfers/transfer", by_status(Transfer)),
        ],
        "failing_deliveries": Delivery.objects.filter(
            Q(status="failed") | Q(status__in=["pending", "delivering"], attempts__gt=0),
            event__merchant=merchant,
        ).count(),
    }

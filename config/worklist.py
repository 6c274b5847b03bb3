"""What needs support and ops today: the dashboard home's worklist and platform totals.

It reads every app's tables, so it lives above them (config wires the dashboard); each item is
a count and the link to the filtered list that shows the rows."""

from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from django.db.models import Count, Sum
from django.urls import reverse
from django.utils import timezone

from kyc.models import KycSubmission, SubmissionOutcome
from payments import selectors as payment_selectors
from payments.models import Payin, PayinStatus, Payout, ProviderDiscrepancy, Wallet
from transfers import selectors as transfer_selectors
from transfers.models import LegStatus, Transfer, TransferStatus
from webhooks import selectors as webhook_selectors
from webhooks.admin_deliveries import FAILING_DELIVERIES_QUERY
from webhooks.models import Delivery


@dataclass(frozen=True)
class WorkItem:
    label: str
    count: int
    url: str
    hint: str


def _changelist(model: type, query: str = "") -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return f"{url}?{query}" if query else url


def support_worklist(*, now: datetime) -> list[WorkItem]:
    """Counts of what support should look at now, each linking to its filtered list."""
    return [
        WorkItem(
            "Failed transfers holding collected funds",
            Transfer.objects.filter(  # returned funds leave the payout cancelled
                status=TransferStatus.FAILED,
                payin_status=LegStatus.COMPLETED,
                payout_status=LegStatus.FAILED,
            ).count(),
            _changelist(
                Transfer,
                "status__exact=failed&payin_status__exact=completed&payout_status__exact=failed",
            ),
            "Relaunch the payout or return the funds to the merchant's wallet.",
        ),
        WorkItem(
            "Payins past their provider timeout",
            payment_selectors.past_provider_timeout(Payin.objects.all(), now=now).count(),
            _changelist(Payin, "attention=past_timeout"),
            "The timeout sweep fails them; check the provider if they stay.",
        ),
        WorkItem(
            "Payouts past their provider timeout",
            payment_selectors.past_provider_timeout(Payout.objects.all(), now=now).count(),
            _changelist(Payout, "attention=past_timeout"),
            "The provider may still pay: mark failed only after asking it.",
        ),
        WorkItem(
            "Transfer legs past their provider timeout",
            transfer_selectors.past_leg_timeout(Transfer.objects.all(), now=now).count(),
            _changelist(Transfer, "attention=past_timeout"),
            "A collection or disbursement the provider has not answered.",
        ),
        WorkItem(
            "Open provider discrepancies",
            ProviderDiscrepancy.objects.filter(resolved_at__isnull=True).count(),
            _changelist(ProviderDiscrepancy, "resolved_at__isempty=1"),
            "Money may have moved without a journal: reconcile, then resolve.",
        ),
        WorkItem(
            "Failing webhook deliveries",
            webhook_selectors.failing_deliveries().count(),
            _changelist(Delivery, FAILING_DELIVERIES_QUERY),
            "Tell the merchant; re-send once their receiver answers again.",
        ),
        WorkItem(
            "KYC submissions awaiting review",
            KycSubmission.objects.filter(outcome=SubmissionOutcome.PENDING).count(),
            _changelist(KycSubmission, "outcome__exact=pending"),
            "Reviews normally finish within seconds; a long wait is a stuck review.",
        ),
    ]


def merchant_summary(*, merchant_id: object, now: datetime) -> dict[str, Any]:
    """What a merchant's staff see first: balances, today's payments by status, failing
    webhook deliveries. Reads only."""
    day_start = timezone.make_aware(datetime.combine(timezone.localdate(now), time.min))

    def by_status(model: type) -> list[dict[str, Any]]:
        rows = (
            model.objects.filter(merchant_id=merchant_id, created_at__gte=day_start)
            .values("status")
            .annotate(count=Count("id"))
            .order_by("status")
        )
        return list(rows)

    return {
        "balances": list(
            Wallet.objects.filter(merchant_id=merchant_id)
            .order_by("currency")
            .values("currency", "available", "reserved")
        ),
        "today": [
            ("Payins", _changelist(Payin), by_status(Payin)),
            ("Payouts", _changelist(Payout), by_status(Payout)),
            ("Transfers", _changelist(Transfer), by_status(Transfer)),
        ],
        "failing_deliveries": webhook_selectors.failing_deliveries(
            Delivery.objects.filter(event__merchant_id=merchant_id)
        ).count(),
        "deliveries_url": _changelist(Delivery, FAILING_DELIVERIES_QUERY),
    }


@dataclass(frozen=True)
class CurrencyTotals:
    currency: str
    wallets: int
    available: object
    reserved: object
    payins_completed: int
    payins_volume: object


def platform_totals() -> list[CurrencyTotals]:
    """Every merchant's money per currency: wallets and completed collections."""
    wallets = {
        row["currency"]: row
        for row in Wallet.objects.values("currency").annotate(
            wallets=Count("id"), available=Sum("available"), reserved=Sum("reserved")
        )
    }
    payins = {
        row["send_currency"]: row
        for row in Payin.objects.filter(status=PayinStatus.COMPLETED)
        .values("send_currency")
        .annotate(count=Count("id"), volume=Sum("send_amount"))
    }
    return [
        CurrencyTotals(
            currency=currency,
            wallets=wallets.get(currency, {}).get("wallets", 0),
            available=wallets.get(currency, {}).get("available") or 0,
            reserved=wallets.get(currency, {}).get("reserved") or 0,
            payins_completed=payins.get(currency, {}).get("count", 0),
            payins_volume=payins.get(currency, {}).get("volume") or 0,
        )
        for currency in sorted(set(wallets) | set(payins))
    ]

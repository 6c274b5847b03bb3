"""Helpers of the credit_wallet and debit_wallet tests: running them, what they leave, the
provider discrepancies they settle, and the harness of their races."""

import io
import json
from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from merchants.models import AuditLogEntry
from payments import provider
from payments.models import Journal, Payin, Payout, ProviderDiscrepancy, Wallet
from payments.services.sweeps import payments_fail_timed_out
from payments.services.transitions import PAYIN_CALLBACK, PAYOUT_CALLBACK
from tests.payments.conftest import (
    SILENT_PHONE,
    SN_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.transfers import conftest as transfer_helpers
from transfers.models import Transfer
from transfers.services.submission import COLLECTION_CALLBACK
from transfers.services.sweeps import transfers_fail_timed_out

CM_SILENT_PHONE = "+237670001999"  # the sandbox never answers for it


def adjust(command: str, merchant, amount: str, *args: str, currency: str = "XOF") -> dict:
    """Run credit_wallet or debit_wallet with --json; its output."""
    return adjust_and_stderr(command, merchant, amount, *args, currency=currency)[0]


def adjust_and_stderr(
    command: str, merchant, amount: str, *args: str, currency: str = "XOF"
) -> tuple[dict, str]:
    """Run credit_wallet or debit_wallet with --json: its JSON output and what it wrote on
    stderr."""
    out, err = io.StringIO(), io.StringIO()
    call_command(
        command,
        str(merchant.id),
        currency,
        amount,
        "--reason",
        "provider statement 2024-05",
        *args,
        "--json",
        stdout=out,
        stderr=err,
    )
    return json.loads(out.getvalue()), err.getvalue()


def balances(api, currency: str = "XOF") -> dict:
    """The merchant's balances in `currency`, as GET /balances shows them."""
    return next(
        item for item in api.get("/balances").json()["data"] if item["currency"] == currency
    )


def ledger_clean() -> None:
    out = io.StringIO()
    call_command("check_ledger", "--json", stdout=out)
    assert json.loads(out.getvalue())["ok"] is True


def adjustment_state(merchant) -> tuple:
    """What a refused adjustment must leave as it was."""
    return (
        list(Wallet.objects.filter(merchant=merchant).values_list("currency", "available")),
        Journal.objects.filter(merchant=merchant).count(),
        AuditLogEntry.objects.filter(merchant=merchant).count(),
        list(ProviderDiscrepancy.objects.values_list("id", "resolved_at")),
    )


def late_answer(callback: str, reference: str, outcome: str) -> None:
    provider.deliver_answer(
        callback=callback, reference=reference, provider_reference="SIM-late", outcome=outcome
    )


_KINDS = {
    "payin": (payin_body, Payin, PAYIN_CALLBACK),
    "payout": (payout_body, Payout, PAYOUT_CALLBACK),
}


def _created(api, capture, kind: str, phone: str) -> str:
    """The id of a new 10000 XOF payin or payout to `phone`, submitted to the provider."""
    body_of, _, _ = _KINDS[kind]
    body = body_of(create_quote(api, kind), create_customer(api), phone)
    with capture(execute=True):
        response = api.post(f"/{kind}s", body)
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def _answered_late(kind: str, payment_id: str, outcome: str) -> ProviderDiscrepancy:
    """The discrepancy the provider's `outcome` for a payment already final leaves."""
    late_answer(_KINDS[kind][2], payment_id, outcome)
    return ProviderDiscrepancy.objects.get(resource_id=payment_id)


def _failed_by_the_timeout_sweep(settings) -> None:
    later = timezone.now() + timedelta(seconds=settings.PROVIDER_TIMEOUT_SECONDS + 1)
    payments_fail_timed_out(now=later)


def payout_paid_after_we_failed_it(api, merchant, capture, settings) -> ProviderDiscrepancy:
    """A 10000 XOF payout (10200 with its fee) from a 20000 float, failed by the timeout sweep
    (its reservation released), then reported completed by the provider."""
    fund(merchant, "20000")
    payout_id = _created(api, capture, "payout", SILENT_PHONE)
    _failed_by_the_timeout_sweep(settings)
    discrepancy = _answered_late("payout", payout_id, provider.COMPLETED)
    assert Payout.objects.get(pk=payout_id).status == "failed"
    assert balances(api)["available"] == "20000"
    return discrepancy


def payin_collected_after_we_failed_it(api, capture, settings) -> ProviderDiscrepancy:
    """A 10000 XOF payin (9850 for the merchant after its 150 fee) failed by the timeout sweep,
    then reported completed by the provider: the payer paid, the wallet got nothing."""
    payin_id = _created(api, capture, "payin", SILENT_PHONE)
    _failed_by_the_timeout_sweep(settings)
    discrepancy = _answered_late("payin", payin_id, provider.COMPLETED)
    payin = Payin.objects.get(pk=payin_id)
    assert (payin.status, payin.receive_amount, payin.total_fee) == ("failed", 9850, 150)
    assert balances(api)["available"] == "0"
    return discrepancy


def transfer_collected_after_we_failed_it(api, capture) -> ProviderDiscrepancy:
    """A transfer of 10000 XAF whose collection the timeout sweep failed (the transfer is
    final: failed, payin failed, payout cancelled), then reported completed by the provider:
    the payer paid, nothing holds the money for the merchant."""
    customer = transfer_helpers.create_customer(api, **transfer_helpers.SENDER_DETAILS)
    quote = transfer_helpers.create_quote(api, customer_id=customer["id"])
    body = transfer_helpers.transfer_body(quote, customer, payer_phone=CM_SILENT_PHONE)
    with capture(execute=True):
        created = api.post("/transfers", body)
    transfer = Transfer.objects.get(pk=created.json()["id"])
    assert transfer.status == "collecting" and transfer.collection_reference
    with capture(execute=True):
        assert transfers_fail_timed_out(now=transfer.leg_timeout_at) == 1
    late_answer(COLLECTION_CALLBACK, str(transfer.id), provider.COMPLETED)
    transfer.refresh_from_db()
    assert (transfer.status, transfer.payin_status, transfer.payout_status) == (
        "failed",
        "failed",
        "cancelled",
    )
    assert (transfer.payin_amount, transfer.payin_currency) == (10000, "XAF")
    return ProviderDiscrepancy.objects.get(resource_id=transfer.id)


def reported_failed_after_it_completed(api, capture, kind: str) -> ProviderDiscrepancy:
    """A 10000 XOF payin or payout (a payout needs the funds) that completed, then reported
    failed by the provider: nothing for an adjustment to settle."""
    payment_id = _created(api, capture, kind, SN_PHONE)
    assert _KINDS[kind][1].objects.get(pk=payment_id).status == "completed"
    return _answered_late(kind, payment_id, provider.FAILED)

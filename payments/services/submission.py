"""Provider submissions of payins, payouts and refunds (a refund is a disbursement as a payout
is), shared: each call recorded before it starts, no lock held during it, the receipt's answer
applied through the state machine. Enqueued after commit by payments.services.enqueue."""

from datetime import datetime
from uuid import UUID

from django.db import models, transaction

from payments import provider
from payments.models import Payin, PayinStatus, Payout, Refund
from payments.services import parties, payins, payouts, refunds
from payments.services.sweeps import poll_first_at
from payments.services.transitions import (
    PAYIN_CALLBACK,
    PAYOUT_CALLBACK,
    REFUND_CALLBACK,
)


def provider_reference_store(
    payment: models.Model, field: str, reference: str, *, refresh: bool = True, **still: object
) -> None:
    """Store the provider's receipt reference in `field` of a submitted payment (a payin, a
    payout, a transfer leg) unless the provider's answer got there first and set it, and only
    while the row still matches `still`; `payment` is then up to date either way (with
    `refresh=False`, for a caller done with it, only when it was stored here)."""
    stored = (
        type(payment)
        .objects.filter(pk=payment.pk, **{field: ""}, **still)
        .update(**{field: reference})
    )
    if stored:
        setattr(payment, field, reference)
    elif refresh:
        payment.refresh_from_db()


def payin_submit(*, payin_id: UUID, now: datetime) -> None:
    """Send the collection to the provider (idempotent: a retried task resubmits the same
    reference). The payin is `pending` before the provider is called, so an answer can never
    arrive for a payin that is not waiting for one. No lock is held during the call."""
    # Each call's start is recorded first (submitted_at), and none starts once the payin is
    # final, received or past its timeout, as for a payout: the timeout sweep leaves a payin
    # whose last call started recently, and fails one only while no call has started since
    # it looked, so a payer is not charged for a payin the merchant is told failed.
    with transaction.atomic():
        payin = payins.payin_submission_start(payin_id=payin_id, now=now)
        if payin is None:
            return
        payin.provider_poll_at = poll_first_at(connection=payin.provider_connection, now=now)
        if payin.provider_poll_at is not None:  # a real operator's leg (no write for the simulator)
            payin.save(update_fields=["provider_poll_at"])
    _payin_send(payin, now=now)


def _payin_send(payin: Payin, *, now: datetime) -> None:
    """The provider call of a pending payin without its receipt yet."""
    try:
        receipt = provider.gateway(payin.provider_connection).submit_collection(
            reference=str(payin.id),
            amount=payin.send_amount,
            currency=payin.send_currency,
            operator_code=payin.operator_code,
            callback=PAYIN_CALLBACK,
            **parties.party_identifier(payin.source),
        )
    except provider.ProviderRejected as rejected:
        payins.payin_transition(
            payin_id=payin.id, to=PayinStatus.FAILED, reason=rejected.reason, at=now
        )
        return
    _receipt_keep(payin, receipt, callback=PAYIN_CALLBACK)


def payout_submit(*, payout_id: UUID, now: datetime) -> None:
    """Send the disbursement to the provider (idempotent by reference; no lock held)."""
    _disbursement_submit(Payout.objects.get(pk=payout_id), now=now)


def refund_submit(*, refund_id: UUID, now: datetime) -> None:
    """Send the refund to the payin's payer, as a payout's disbursement is sent."""
    _disbursement_submit(Refund.objects.get(pk=refund_id), now=now)


def _disbursement_submit(payment: Payout | Refund, *, now: datetime) -> None:
    # Each call's start is recorded first (submitted_at), and none starts once the payment is
    # final, received or past its timeout: the timeout sweep leaves one whose last call
    # started recently, and fails one only while no call has started since it looked.
    started = (
        type(payment)
        .objects.filter(
            pk=payment.id,
            status="pending",  # a payout's and a refund's
            provider_reference="",
            provider_timeout_at__gt=now,
        )
        .update(
            submitted_at=now,
            provider_poll_at=poll_first_at(connection=payment.provider_connection, now=now),
        )
    )
    if not started:
        return
    _disbursement_send(payment, now=now)


def _disbursement_leg(payment: Payout | Refund) -> dict:
    """How a pending payout or refund is paid: its amount and currency, the party it pays, its
    callback, and the transition that fails it."""
    if isinstance(payment, Refund):
        return {
            "amount": payment.amount,
            "currency": payment.currency,
            "callback": REFUND_CALLBACK,
            "fail": lambda **move: refunds.refund_transition(refund_id=payment.id, **move),
        }
    return {
        "amount": payment.receive_amount,
        "currency": payment.receive_currency,
        "callback": PAYOUT_CALLBACK,
        "fail": lambda **move: payouts.payout_transition(payout_id=payment.id, **move),
    }


def _disbursement_send(payment: Payout | Refund, *, now: datetime) -> None:
    """The provider call of a pending payout or refund without its receipt yet."""
    leg = _disbursement_leg(payment)
    try:
        receipt = provider.gateway(payment.provider_connection).submit_disbursement(
            reference=str(payment.id),
            amount=leg["amount"],
            currency=leg["currency"],
            operator_code=payment.operator_code,
            callback=leg["callback"],
            **parties.party_identifier(payment.recipient),
        )
    except provider.ProviderRejected as rejected:
        leg["fail"](to="failed", reason=rejected.reason, at=now)
        return
    _receipt_keep(payment, receipt, callback=leg["callback"])


def _receipt_keep(
    payment: Payin | Payout | Refund, receipt: provider.ProviderReceipt, *, callback: str
) -> None:
    """Keep what a receipt says of a payment the caller is done with: its answer, whose move
    stores the provider reference with it, or else the reference alone."""
    if receipt.outcome is None:
        provider_reference_store(
            payment, "provider_reference", receipt.provider_reference, refresh=False
        )
    else:
        provider.receipt_answer_deliver(receipt, callback=callback, reference=str(payment.id))


def provider_status_check(*, connection: str, leg: str, reference: str) -> bool:
    """What a real operator's callback hints at: read the status of request `reference` of leg
    `leg` from connection `connection` and apply it as an answer (True when it had one). A
    removed connection or an unknown leg changes nothing."""
    if leg not in provider.CALLBACK_LEGS:
        return False
    try:
        gateway_connection = provider.gateway(connection)
    except KeyError:
        return False
    kind, callback = provider.CALLBACK_LEGS[leg]
    receipt = gateway_connection.transaction_status(kind=kind, reference=reference)
    provider.receipt_answer_deliver(receipt, callback=callback, reference=reference)
    return receipt.outcome is not None

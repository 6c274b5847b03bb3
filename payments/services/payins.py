"""Payins: creation, the one state machine (payin_transition) and its effects, provider
answers."""

import json
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

from django.db import connection, transaction
from django.utils import timezone

from core import money
from core.transactions import joined_atomic
from core.transitions import InvalidTransition, StateMachine
from merchants.models import Merchant
from payments import provider
from payments.ledger.accounts import (
    FEE_REVENUE,
    MERCHANT_AVAILABLE,
    account_ids,
    account_ids_known,
    provider_clearing,
    wallet_locked,
)
from payments.ledger.journals import BalanceOutOfRange, UnbalancedJournal
from payments.models import Payin, PayinHistory, PayinStatus
from payments.services import enqueue, parties, transitions
from payments.services.transitions import late_answer_ignored
from quotes import services as quote_services
from quotes.models import FlowType, QuoteStatus
from webhooks.services.events import deliveries_enqueue_after_commit, event_new, event_record

PAYIN_ALLOWED = {
    PayinStatus.CREATED: {PayinStatus.PENDING, PayinStatus.FAILED},
    PayinStatus.PENDING: {PayinStatus.COMPLETED, PayinStatus.FAILED},
}


def payin_create(
    *,
    merchant: Merchant,
    quote_id: UUID,
    customer_id: UUID,
    source: dict[str, Any],
    now: datetime,
) -> Payin:
    """Consume the merchant's active payin quote and create the payin (`created`), with its
    history row, in one statement (PAYIN_CREATION) after the quote's locked read; the provider
    submission is enqueued when the transaction commits. Joins the caller's transaction (no
    savepoint, two round trips fewer): a refusal rolls back what the caller wrote with it."""
    with joined_atomic():
        quote = quote_services.quote_lock_consumable(
            merchant=merchant,
            quote_id=quote_id,
            flow_type=FlowType.PAYIN,
            customer_id=customer_id,
            now=now,
        )
        payer = parties.party_for_quote(quote=quote, party=source, field="source")
        payin = Payin(
            merchant=merchant,
            customer_id=customer_id,
            quote=quote,
            status=PayinStatus.CREATED,
            **parties.quote_amounts(quote),
            wallet_impact={
                "credit_amount": money.format_amount(quote.receive_amount),
                "currency": quote.receive_currency,
            },
            source=payer,
            provider_connection=provider.route(quote.operator_code),
            provider_timeout_at=parties.provider_timeout_at(now),
            created_at=now,
            updated_at=now,
        )
        history_id = _payin_insert(payin, now=now)
        quote.status, quote.consumed_at = QuoteStatus.CONSUMED, now
        payin.history_entries = [
            PayinHistory(id=history_id, payin=payin, status=PayinStatus.CREATED, created_at=now)
        ]
        payin.refund_ids, payin.refunded_total = [], Decimal(0)  # as the selectors annotate
        enqueue.submission_enqueue_on_commit(payin)
    return payin


PAYIN_CREATION = """
WITH consumed AS (
    UPDATE quotes_quote SET status = 'consumed', consumed_at = %(now)s
    WHERE id = %(quote_id)s AND status = 'active'
    RETURNING id
), payin AS (
    INSERT INTO payments_payin
        (id, merchant_id, customer_id, quote_id, status, country_code, rail_type, operator_code,
         send_amount, send_currency, receive_amount, receive_currency, total_fee, pricing,
         wallet_impact, source, provider_reference, provider_connection, provider_timeout_at,
         failure_reason, created_at, updated_at)
    SELECT %(id)s, %(merchant_id)s, %(customer_id)s, consumed.id, 'created', %(country_code)s,
        %(rail_type)s, %(operator_code)s, %(send_amount)s, %(send_currency)s,
        %(receive_amount)s, %(receive_currency)s, %(total_fee)s, %(pricing)s::jsonb,
        %(wallet_impact)s::jsonb, %(source)s::jsonb, '', %(provider_connection)s,
        %(provider_timeout_at)s, '', %(now)s, %(now)s
    FROM consumed
    RETURNING id
)
INSERT INTO payments_payinhistory (payin_id, status, reason, created_at)
SELECT id, 'created', '', %(now)s FROM payin
RETURNING id
"""
"""A payin's creation in one statement, after its quote's locked read and checks: the quote
marked consumed, the payin row and its `created` history row. The ORM sent three statements
for it; the measurement is in docs/decisions.md (Performance)."""


def _payin_insert(payin: Payin, *, now: datetime) -> int:
    """PAYIN_CREATION for the unsaved `payin`, whose quote the caller has locked and checked;
    returns its history row's id."""
    params = {
        "now": now,
        "quote_id": payin.quote_id,
        "id": payin.id,
        "merchant_id": payin.merchant_id,
        "customer_id": payin.customer_id,
        "country_code": payin.country_code,
        "rail_type": payin.rail_type,
        "operator_code": payin.operator_code,
        "send_amount": payin.send_amount,
        "send_currency": payin.send_currency,
        "receive_amount": payin.receive_amount,
        "receive_currency": payin.receive_currency,
        "total_fee": payin.total_fee,
        "pricing": json.dumps(payin.pricing),
        "wallet_impact": json.dumps(payin.wallet_impact),
        "source": json.dumps(payin.source),
        "provider_connection": payin.provider_connection,
        "provider_timeout_at": payin.provider_timeout_at,
    }
    with connection.cursor() as cursor:
        cursor.execute(PAYIN_CREATION, params)
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError(f"Quote {payin.quote_id}: the payin's creation wrote nothing")
    payin._state.adding, payin._state.db = False, connection.alias  # as saved: its row exists
    return row[0]


def payin_snapshot(payin: Payin) -> dict[str, Any]:
    """data.object of the payin.* events (docs/webhooks.md)."""
    return {
        "id": payin.id,
        "status": payin.status,
        "send_amount": money.format_amount(payin.send_amount),
        "send_currency": payin.send_currency,
        "receive_amount": money.format_amount(payin.receive_amount),
        "receive_currency": payin.receive_currency,
        "country_code": payin.country_code,
        "operator_code": payin.operator_code,
        "rail_type": payin.rail_type,
        "provider_reference": payin.provider_reference or None,
        "wallet_impact": payin.wallet_impact,
        "completed_at": payin.completed_at,
        "failed_at": payin.failed_at,
        "failure_reason": payin.failure_reason or None,
    }


def payin_transition(
    *,
    payin_id: UUID,
    to: str,
    reason: str = "",
    at: datetime,
    provider_reference: str = "",
) -> Payin:
    """The one way a payin changes status: locks it, checks the move (InvalidTransition), writes
    the status and its history, then applies the move's effects (the ledger posting, the
    webhook event), in one transaction. Moving to the current status changes nothing (but keeps
    a provider reference it did not have)."""
    with transaction.atomic():
        payin = next(iter(Payin.objects.raw(PAYIN_LOCKED, [payin_id])), None)
        if payin is None:
            raise Payin.DoesNotExist(f"No payin {payin_id}.")
        # A pending payin's completion is one statement; every other move is the shared one.
        if payin.status == PayinStatus.PENDING and to == PayinStatus.COMPLETED:
            return _payin_complete_locked(payin, at=at, provider_reference=provider_reference)
        return transitions.payment_move_locked(
            payin,
            to=to,
            reason=reason,
            at=at,
            provider_reference=provider_reference,
            machine=PAYIN_MACHINE,
        )


PAYIN_LOCKED = "SELECT * FROM payments_payin WHERE id = %s FOR UPDATE"
"""The read of every payin move: its row alone, locked (locking its merchant's too would
deadlock with the deferred foreign-key checks of concurrent inserts: wallet lock, then merchant
key share). The ORM compiled it on every move; measured in docs/decisions.md (Performance)."""

PAYIN_SUBMISSION = """
WITH locked AS (
    SELECT id, status FROM payments_payin WHERE id = %(payin_id)s FOR UPDATE
), started AS (
    UPDATE payments_payin
    SET status = 'pending', submitted_at = %(now)s,
        updated_at = CASE WHEN locked.status = 'created' THEN %(now)s ELSE updated_at END
    FROM locked
    WHERE payments_payin.id = locked.id AND locked.status IN ('created', 'pending')
        AND payments_payin.provider_reference = ''
        AND payments_payin.provider_timeout_at > %(now)s
    RETURNING payments_payin.*, locked.status AS was
), history AS (
    INSERT INTO payments_payinhistory (payin_id, status, reason, created_at)
    SELECT id, 'pending', %(reason)s, %(now)s FROM started WHERE was = 'created'
)
SELECT * FROM started
"""
"""A provider call's start, in one statement: the payin locked, then, while it waits for a call
(created or pending, no provider reference, not past its timeout), moved from created to
pending with its history row (PAYIN_ALLOWED's move, which has no effects), or, pending
already, its new call's start recorded (submitted_at). The ORM sent three statements for it;
the measurement is in docs/decisions.md (Performance)."""


def payin_submission_start(*, payin_id: UUID, now: datetime) -> Payin | None:
    """PAYIN_SUBMISSION in the caller's transaction: the payin as it is now, pending, or None
    when it is not waiting for a call (final, answered, past its timeout)."""
    params = {"payin_id": payin_id, "now": now, "reason": transitions.REASON_SUBMITTED}
    payin = next(iter(Payin.objects.raw(PAYIN_SUBMISSION, params)), None)
    if payin is None and not Payin.objects.filter(pk=payin_id).exists():
        raise Payin.DoesNotExist(f"No payin {payin_id}.")
    return payin


PAYIN_COMPLETION = """
WITH wallet AS (
    UPDATE payments_wallet SET available = available + %(credit)s, updated_at = %(now)s
    WHERE merchant_id = %(merchant_id)s AND currency = %(currency)s
        AND available + %(credit)s < %(ceiling)s
    RETURNING id
), moved AS (
    UPDATE payments_payin
    SET status = 'completed', completed_at = %(at)s, updated_at = %(at)s,
        provider_reference = %(provider_reference)s
    FROM wallet
    WHERE payments_payin.id = %(payin_id)s AND payments_payin.status = 'pending'
    RETURNING payments_payin.id
), history AS (
    INSERT INTO payments_payinhistory (payin_id, status, reason, created_at)
    SELECT id, 'completed', '', %(at)s FROM moved
), journal AS (
    INSERT INTO payments_journal
        (id, merchant_id, currency, kind, resource_type, resource_id, memo, created_at)
    SELECT %(journal_id)s, %(merchant_id)s, %(currency)s, 'payin_completed', 'payin', id, '',
        %(at)s
    FROM moved
    RETURNING id
), lines AS (
    INSERT INTO payments_journalline (journal_id, account_id, amount)
    SELECT journal.id, line.account_id, line.amount
    FROM journal, unnest(%(account_ids)s::bigint[], %(amounts)s::numeric[])
        AS line(account_id, amount)
), event AS (
    INSERT INTO webhooks_event
        (id, merchant_id, event_type, data_type, data_id, payload, body, created_at)
    SELECT %(event_id)s, %(merchant_id)s, 'payin.completed', 'payin', id, %(payload)s::jsonb,
        %(body)s, %(at)s
    FROM moved
    RETURNING id
), deliveries AS (
    INSERT INTO webhooks_delivery
        (id, event_id, endpoint_id, status, attempts, next_attempt_at, dispatched_at,
         last_error, created_at, updated_at)
    SELECT gen_random_uuid(), event.id, e.id, 'pending', 0, %(at)s, %(at)s, '', %(at)s, %(at)s
    FROM event JOIN webhooks_webhookendpoint e ON e.merchant_id = %(merchant_id)s AND e.enabled
        AND (e.event_types = '[]'::jsonb OR e.event_types @> '["payin.completed"]'::jsonb)
    RETURNING id
)
SELECT (SELECT count(*) FROM moved), ARRAY(SELECT id FROM deliveries)
"""
"""A pending payin's completion in one statement: its status and history row, the credit of
its merchant's wallet (locked by the update, after the payin's row, as post_journal locks it;
refused at the column's ceiling), the payin_completed journal and its lines, the
payin.completed event and a delivery per subscribed endpoint (as DELIVERIES_FAN_OUT
subscribes them). Nothing is written unless the wallet is. The ORM sent eight statements for
it; the measurement is in docs/decisions.md (Performance)."""


def _payin_complete_locked(payin: Payin, *, at: datetime, provider_reference: str) -> Payin:
    """PAYIN_COMPLETION for a pending payin the caller has locked; its deliveries are sent
    after commit. Ledger accounts this process does not know yet are read or made after the
    wallet is locked, a wallet still missing is created (the merchant's first credit in its
    currency); a credit past the column's ceiling raises BalanceOutOfRange, nothing written."""
    payin.status = PayinStatus.COMPLETED
    payin.completed_at = payin.updated_at = at
    # The reference a completion names replaces the one kept so far (MTN's transaction id
    # replaces its request's id), as payment_move_locked does.
    payin.provider_reference = provider_reference or payin.provider_reference
    lines = [
        (provider_clearing(payin.operator_code), -payin.send_amount),
        (MERCHANT_AVAILABLE, payin.receive_amount),
        (FEE_REVENUE, payin.total_fee),
    ]
    lines = [(code, amount) for code, amount in lines if amount]
    if sum(amount for _, amount in lines) != 0:
        raise UnbalancedJournal(f"Lines do not sum to zero: {lines!r}")
    codes = {code for code, _ in lines}
    ids = account_ids_known(
        merchant_id=payin.merchant_id, currency=payin.receive_currency, codes=codes
    )
    if ids is None:  # as post_journal: the wallet locked before accounts are read or made
        _wallet_lock_for_credit(payin)
        ids = account_ids(
            merchant_id=payin.merchant_id, currency=payin.receive_currency, codes=codes
        )
    event = event_new(
        merchant_id=payin.merchant_id,
        event_type="payin.completed",
        data_type="payin",
        data_id=payin.id,
        data_object=payin_snapshot(payin),
        at=at,
    )
    params = {
        "payin_id": payin.id,
        "merchant_id": payin.merchant_id,
        "currency": payin.receive_currency,
        "credit": payin.receive_amount,
        "ceiling": money.AMOUNT_CEILING,
        "provider_reference": payin.provider_reference,
        "at": at,
        "now": timezone.now(),
        "journal_id": uuid4(),
        "account_ids": [ids[code] for code, _ in lines],
        "amounts": [amount for _, amount in lines],
        "event_id": event.id,
        "payload": json.dumps(event.payload),
        "body": event.body,
    }
    with connection.cursor() as cursor:
        cursor.execute(PAYIN_COMPLETION, params)
        moved, delivery_ids = cursor.fetchone()
        if not moved:  # no wallet yet, or a credit past the ceiling: nothing was written
            _wallet_lock_for_credit(payin)
            cursor.execute(PAYIN_COMPLETION, params)
            moved, delivery_ids = cursor.fetchone()
    if not moved:
        raise RuntimeError(f"Payin {payin.id}: its completion wrote nothing")
    deliveries_enqueue_after_commit(delivery_ids)
    return payin


def _wallet_lock_for_credit(payin: Payin) -> None:
    """Lock the wallet the payin credits, created if missing; BalanceOutOfRange if the credit
    would pass what its column holds."""
    wallet = wallet_locked(merchant_id=payin.merchant_id, currency=payin.receive_currency)
    if wallet.available + payin.receive_amount >= money.AMOUNT_CEILING:
        raise BalanceOutOfRange()


def _payin_event_record(payin: Payin, *, at: datetime, **_: object) -> None:
    """The event of a payin's final status."""
    event_record(
        merchant_id=payin.merchant_id,
        event_type=f"payin.{payin.status}",
        data_type="payin",
        data_id=payin.id,
        data_object=payin_snapshot(payin),
        at=at,
    )


# A completion is PAYIN_COMPLETION's (status, history, journal, wallet, event, deliveries).
_PAYIN_EFFECTS = {PayinStatus.FAILED: (transitions.decline_log, _payin_event_record)}
PAYIN_MACHINE = StateMachine(
    allowed=PAYIN_ALLOWED,
    refused=transitions.payment_refused,
    history=transitions.payment_history_write,
    effects=_PAYIN_EFFECTS,
)


def payin_answer_move(outcome: str, reason: str) -> dict[str, str]:
    """The move a provider's answer makes: `to` and its `reason`."""
    to = PayinStatus.COMPLETED if outcome == provider.COMPLETED else PayinStatus.FAILED
    return {"to": to, "reason": reason if to == PayinStatus.FAILED else ""}


@provider.answer_applier(transitions.PAYIN_CALLBACK)
def payin_apply_provider_result(
    *, reference: str, provider_reference: str, outcome: str, reason: str, at: datetime
) -> None:
    """The provider's answer for a collection (gateway callback, a receipt, or the provider
    asked by the sweep). Repeated answers change nothing; an answer for a payin already final
    otherwise (e.g. failed by the timeout sweep) is logged and ignored."""
    try:
        payin_transition(
            payin_id=UUID(reference),
            **payin_answer_move(outcome, reason),
            at=at,
            provider_reference=provider_reference,
        )
    except InvalidTransition:
        late_answer_ignored(
            payment=Payin.objects.get(pk=UUID(reference)),
            resource_type="payin",
            provider_reference=provider_reference,
            outcome=outcome,
            reason=reason,
            at=at,
        )

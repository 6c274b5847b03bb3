"""The ledger accounts a posting needs are created in one order, whichever process creates them.

A merchant's first payin and first payout completion through one operator, in one currency,
both create its fee_revenue and provider_clearing:<operator> accounts (ON CONFLICT DO NOTHING,
which waits for a concurrent transaction's uncommitted row of the same key). Taken in a set's
order, that order depends on the process's string hashes: two worker processes could insert
them in opposite orders, each waiting for the row the other had inserted, a deadlock. The two
answers run here in two processes whose hash seeds order the two codes oppositely, lined up by
a third connection holding an uncommitted row of one of the accounts until both wait for it."""

import os
import subprocess
import sys
import textwrap

import pytest
from django.conf import settings

from payments.ledger.accounts import (
    ADJUSTMENTS,
    FEE_REVENUE,
    MERCHANT_AVAILABLE,
    MERCHANT_RESERVED,
    provider_clearing,
)
from payments.ledger.checks import ledger_breaches
from payments.models import LedgerAccount, Payin, Payout
from tests.faults.conftest import admin_connection, backends_waiting_on_a_lock
from tests.payments.conftest import (
    SILENT_PHONE,
    create_customer,
    create_quote,
    fund,
    payin_body,
    payout_body,
)
from tests.support import MerchantClient
from tests.worker import _database_url, wait_until

OPERATOR = "SN_ORANGE_MOMO"
CLEARING = provider_clearing(OPERATOR)
# what each posting's accounts are, and what the wallet's funding and the payout's
# reservation had created before (see _account_ids)
PAYIN_CODES = [CLEARING, MERCHANT_AVAILABLE, FEE_REVENUE]
PAYOUT_CODES = [MERCHANT_RESERVED, CLEARING, FEE_REVENUE]
EXISTING = [ADJUSTMENTS, MERCHANT_AVAILABLE, MERCHANT_RESERVED]

_MISSING_IN_SET_ORDER = textwrap.dedent(
    """
    import json, sys
    codes, existing = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    print(json.dumps(list({code for code in codes} - {code: 1 for code in existing}.keys())))
    """
)

_ANSWER = textwrap.dedent(
    """
    import sys
    import django
    django.setup()
    from django.utils import timezone
    from payments.services.payins import payin_apply_provider_result
    from payments.services.payouts import payout_apply_provider_result
    from payments.services.refunds import refund_apply_provider_result
    kind, reference = sys.argv[1], sys.argv[2]
    apply = {
        "payin": payin_apply_provider_result,
        "payout": payout_apply_provider_result,
        "refund": refund_apply_provider_result,
    }[kind]
    apply(reference=reference, provider_reference="SIM-" + reference[:8], outcome="completed",
          reason="", at=timezone.now())
    """
)


def _missing_in_set_order(seed: int, codes: list[str]) -> list[str]:
    import json

    out = subprocess.run(
        [sys.executable, "-c", _MISSING_IN_SET_ORDER, json.dumps(codes), json.dumps(EXISTING)],
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def _opposite_seeds() -> tuple[int, int]:
    """A hash seed under which the payout's missing accounts come in one order, and one under
    which the payin's come in the other."""
    payout = {seed: _missing_in_set_order(seed, PAYOUT_CODES) for seed in range(1, 40)}
    first = next(seed for seed, order in payout.items() if order == [CLEARING, FEE_REVENUE])
    for seed in range(1, 40):
        if _missing_in_set_order(seed, PAYIN_CODES) == [FEE_REVENUE, CLEARING]:
            return first, seed
    raise AssertionError("no hash seed orders the codes the other way")


def _answer(kind: str, reference: str, seed: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONHASHSEED": str(seed),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _database_url(),
        "CONN_MAX_AGE": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-c", _ANSWER, kind, reference],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.django_db(transaction=True)
def test_first_payin_and_payout_of_an_operator_completing_at_once_do_not_deadlock(
    enabled_merchant,
):
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api)
    fund(enabled_merchant, "50000")  # the wallet, with its adjustments and available accounts
    payout = api.post(
        "/payouts",
        payout_body(create_quote(api, "payout", operator=OPERATOR), customer, SILENT_PHONE),
    ).json()
    payin = api.post(
        "/payins", payin_body(create_quote(api, "payin", operator=OPERATOR), customer, SILENT_PHONE)
    ).json()
    assert Payout.objects.get(pk=payout["id"]).status == "pending"
    assert Payin.objects.get(pk=payin["id"]).status == "pending"
    assert not LedgerAccount.objects.filter(code__in=[CLEARING, FEE_REVENUE]).exists()
    payout_seed, payin_seed = _opposite_seeds()

    holder, monitor = admin_connection(), admin_connection()
    answers = []
    try:
        with holder.transaction():
            holder.execute(
                "INSERT INTO payments_ledgeraccount (merchant_id, currency, code, created_at)"
                " VALUES (%s, 'XOF', %s, now())",
                [enabled_merchant.pk, CLEARING],
            )
            answers.append(_answer("payout", payout["id"], payout_seed))
            answers.append(_answer("payin", payin["id"], payin_seed))
            # the first to lock the wallet waits for the held account, the other for the wallet
            assert wait_until(
                lambda: (
                    len(backends_waiting_on_a_lock(monitor, pattern="%ledgeraccount%")) == 1
                    and len(backends_waiting_on_a_lock(monitor, pattern="%payments_wallet%")) == 1
                ),
                timeout=60,
            )
            raise _RollBack  # the held account goes: both go on at once
    except _RollBack:
        pass
    finally:
        holder.close()
        outputs = [answer.communicate(timeout=60)[0] for answer in answers]
        monitor.close()

    assert [answer.returncode for answer in answers] == [0, 0], "\n".join(outputs)
    assert Payout.objects.get(pk=payout["id"]).status == "completed"
    assert Payin.objects.get(pk=payin["id"]).status == "completed"
    assert ledger_breaches() == []


class _RollBack(Exception):
    pass

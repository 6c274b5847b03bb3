"""The sandbox provider of docs/api.md. The outcome is decided by the last three digits of the
party's phone (or account number on the bank rail):

    000  -> declined: the answer is `failed` with reason `provider_declined`
    999  -> never answers: the leg stays pending until the timeout sweep fails it (asked for
            its status before that, it says it is still working on it)
    998  -> a wallet that only pays: collections from it complete, disbursements to it
            (payouts, transfer disbursements, refunds) are declined (`provider_declined`)
    else -> `completed` after PROVIDER_SIMULATION_DELAY_SECONDS

The answer is sent by a Celery task (`payments.tasks.deliver_provider_answer`, counted down by
the delay) that calls the same `deliver_answer()` a real provider callback would; with a delay
of 0 the provider decides at once and its answer comes back in the receipt, which the submitter
applies. No ORM in here.
"""

import uuid
from decimal import Decimal

from django.conf import settings

from payments.provider import (
    COLLECTION,
    COMPLETED,
    DISBURSEMENT,
    FAILED,
    SIMULATOR,
    ProviderReceipt,
    sandbox_gateway,
)

_NAMESPACE = uuid.UUID("6f1c1f2e-8a43-4c55-9d0e-5c0e7a1b2c3d")

DECLINE_SUFFIX = "000"
SILENT_SUFFIX = "999"
REFUSES_DISBURSEMENTS_SUFFIX = "998"


def simulated_outcome(party: str, *, kind: str) -> tuple[str, str] | None:
    """(outcome, reason) for this party and kind of leg, or None when the provider never
    answers."""
    digits = "".join(ch for ch in party if ch.isdigit())
    if digits.endswith(SILENT_SUFFIX):
        return None
    declined = digits.endswith(DECLINE_SUFFIX) or (
        kind == DISBURSEMENT and digits.endswith(REFUSES_DISBURSEMENTS_SUFFIX)
    )
    if declined:
        return FAILED, "provider_declined"
    return COMPLETED, ""


def _provider_reference(kind: str, reference: str) -> str:
    # Deterministic: resubmitting the same reference is the same provider transaction.
    return "SIM-" + uuid.uuid5(_NAMESPACE, f"{kind}:{reference}").hex[:20]


@sandbox_gateway(SIMULATOR)
class SimulatorGateway:
    def transaction_status(
        self, *, kind: str, reference: str, phone: str = "", account_number: str = ""
    ) -> ProviderReceipt:
        """The sandbox keeps no state: its outcome for a request is the one its party decides
        (and by the time anyone asks, after a provider timeout, the delay is long over)."""
        outcome = simulated_outcome(phone or account_number, kind=kind)
        return ProviderReceipt(
            provider_reference=_provider_reference(kind, reference),
            outcome=outcome[0] if outcome else None,
            reason=outcome[1] if outcome else "",
        )

    def submit_collection(self, **kwargs) -> ProviderReceipt:
        return self._submit(kind=COLLECTION, **kwargs)

    def submit_disbursement(self, **kwargs) -> ProviderReceipt:
        return self._submit(kind=DISBURSEMENT, **kwargs)

    def _submit(
        self,
        *,
        kind: str,
        reference: str,
        amount: Decimal,
        currency: str,
        operator_code: str,
        phone: str = "",
        account_number: str = "",
        callback: str,
    ) -> ProviderReceipt:
        from payments import tasks  # the simulator's "network" is the task queue

        provider_reference = _provider_reference(kind, reference)
        outcome = simulated_outcome(phone or account_number, kind=kind)
        if outcome is None:
            return ProviderReceipt(provider_reference=provider_reference)
        if settings.PROVIDER_SIMULATION_DELAY_SECONDS <= 0:
            # An instant provider: its answer comes with the receipt, no queue hop, no callback
            # round trip (the submitter applies it as the callback would).
            return ProviderReceipt(
                provider_reference=provider_reference, outcome=outcome[0], reason=outcome[1]
            )
        tasks.deliver_provider_answer.apply_async(
            kwargs={
                "callback": callback,
                "reference": reference,
                "provider_reference": provider_reference,
                "outcome": outcome[0],
                "reason": outcome[1],
            },
            countdown=settings.PROVIDER_SIMULATION_DELAY_SECONDS,
        )
        return ProviderReceipt(provider_reference=provider_reference)

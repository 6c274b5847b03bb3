"""The provider gateway: how Cowry asks a mobile money / bank provider to move money, and how
the provider's answer comes back.

A submission names a `reference` (ours, unique per leg: a retried submission with the same
reference is the same request to the provider) and a `callback`: the kind of leg, whose
function `(*, reference, provider_reference, outcome, reason, at)` applies the answer
(ANSWER_APPLIERS, filled by `@answer_applier(leg)` where each function is defined). Answers
arrive through `deliver_answer()`, which is what a real provider's HTTP callback would call
too; `outcome` is "completed" or "failed". A provider that decides at once (the sandbox with
no delay) gives its answer in the receipt instead: the submitter applies it, as its callback
would (`receipt_answer_deliver`).

Each leg names the provider connection it goes through (chosen from its operator's route when
it is created, rails.selectors): `gateway(connection)` is that connection's adapter, the
built-in simulator's for `simulator`. A real operator's callback reaches
payments.provider.callbacks, which reads the status and applies it as an answer.

Submitting is network I/O: never call it while holding a database lock.
"""

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol, TypeVar

from django.conf import settings
from django.utils import timezone

from rails import selectors as rails_selectors

logger = logging.getLogger("cowry.provider")

COMPLETED = "completed"
FAILED = "failed"
OUTCOMES = (COMPLETED, FAILED)

COLLECTION = "collection"
DISBURSEMENT = "disbursement"

# What one whole provider reference looks like (the sandbox's: SIM- and 20 hex digits; a real
# provider's form goes here too): the dashboard finds a search that is one by equality on the
# reference columns, through their indexes, instead of a contains over every row.
REFERENCE_FORMS = (re.compile(r"SIM-[0-9a-f]{20}", re.IGNORECASE),)


# Who applies a provider's answer, by leg (a submission's `callback`): payin, payout and refund
# (payments.services.payins, payouts, refunds), transfer_collection and transfer_disbursement
# (transfers.services.submission). Each app's ready() imports the modules that register here.
ANSWER_APPLIERS: dict[str, Callable[..., None]] = {}
Applier = TypeVar("Applier", bound=Callable[..., None])


def answer_applier(leg: str) -> Callable[[Applier], Applier]:
    """Register the decorated function as the one that applies the answers for `leg`."""

    def register(function: Applier) -> Applier:
        ANSWER_APPLIERS[leg] = function
        return function

    return register


class ProviderUnavailable(Exception):
    """Transient: the provider could not be reached or answered 5xx. Retry the submission."""


class ProviderRejected(Exception):
    """The provider refused the submission synchronously; the leg fails with `reason`."""

    def __init__(self, reason: str, message: str = "") -> None:
        self.reason = reason
        super().__init__(message or reason)


@dataclass(frozen=True)
class ProviderReceipt:
    """The provider accepted the request. Its answer comes later through the callback, or,
    from a provider that decided at once, here: `outcome` (None: later) and `reason`."""

    provider_reference: str
    outcome: str | None = None
    reason: str = ""


class ProviderGateway(Protocol):
    def submit_collection(
        self,
        *,
        reference: str,
        amount: Decimal,
        currency: str,
        operator_code: str,
        phone: str = "",
        account_number: str = "",
        callback: str,
    ) -> ProviderReceipt:
        """Collect `amount` from the payer (phone for mobile money, account for bank)."""

    def submit_disbursement(
        self,
        *,
        reference: str,
        amount: Decimal,
        currency: str,
        operator_code: str,
        phone: str = "",
        account_number: str = "",
        callback: str,
    ) -> ProviderReceipt:
        """Pay `amount` to the recipient (phone for mobile money, account for bank)."""

    def transaction_status(
        self, *, kind: str, reference: str, phone: str = "", account_number: str = ""
    ) -> ProviderReceipt:
        """What the provider knows of the request it received as `reference` (`kind` is
        COLLECTION or DISBURSEMENT): its receipt, with the outcome once decided."""


SIMULATOR = "simulator"

# The sandbox connection's gateway by name (PAYMENTS_PROVIDER_GATEWAY, `simulator` by default):
# the built-in simulator, or a variant with a fault that a test registers the same way.
SANDBOX_GATEWAYS: dict[str, Callable[[], ProviderGateway]] = {}
Factory = TypeVar("Factory", bound=Callable[[], ProviderGateway])


def sandbox_gateway(name: str) -> Callable[[Factory], Factory]:
    """Register the decorated class as the sandbox's gateway called `name`."""

    def register(factory: Factory) -> Factory:
        known = SANDBOX_GATEWAYS.setdefault(name, factory)
        if known.__qualname__ != factory.__qualname__ or known.__module__ != factory.__module__:
            raise ValueError(f"Two sandbox gateways are called {name!r}.")
        SANDBOX_GATEWAYS[name] = factory
        return factory

    return register


def _mtn_momo(connection: rails_selectors.ConnectionSettings) -> ProviderGateway:
    from payments.provider.mtn_momo import MtnMomoGateway  # it imports this module

    return MtnMomoGateway(connection)


# The adapter of each kind of connection (rails.models.ConnectionKind) but the simulator's.
ADAPTERS = {"mtn_momo": _mtn_momo}


def gateway(connection: str = SIMULATOR) -> ProviderGateway:
    """The gateway of provider connection `connection` (the one a leg names): a real operator
    API's adapter, or for `simulator` the sandbox gateway PAYMENTS_PROVIDER_GATEWAY names."""
    if connection != SIMULATOR:
        settings_of = rails_selectors.connection_settings(connection)
        return ADAPTERS[settings_of.kind](settings_of)
    return SANDBOX_GATEWAYS[getattr(settings, "PAYMENTS_PROVIDER_GATEWAY", SIMULATOR)]()


def route(operator_code: str) -> str:
    """The connection a new leg of `operator_code` goes through (read from a memo, no query)."""
    return rails_selectors.operator_route(operator_code)


# The legs a provider callback can name (the name in the callback URL): their kind and the
# callback that applies their answer. Each app that owns legs registers its own.
CALLBACK_LEGS: dict[str, tuple[str, str]] = {}


def callback_leg_register(name: str, *, kind: str, callback: str) -> None:
    CALLBACK_LEGS[name] = (kind, callback)


def callback_leg_name(callback: str) -> str:
    """The registered name of the leg whose answers `callback` applies."""
    return next(name for name, (_, each) in CALLBACK_LEGS.items() if each == callback)


def deliver_answer(
    *,
    callback: str,
    reference: str,
    provider_reference: str,
    outcome: str,
    reason: str = "",
    at: datetime | None = None,
) -> None:
    """Apply a provider's answer: the single entry point for simulated and real callbacks."""
    if outcome not in OUTCOMES:
        raise ValueError(f"Unknown provider outcome {outcome!r}")
    if callback not in ANSWER_APPLIERS:
        raise ValueError(f"No answer applier for leg {callback!r}")
    ANSWER_APPLIERS[callback](
        reference=reference,
        provider_reference=provider_reference,
        outcome=outcome,
        reason=reason,
        at=at or timezone.now(),
    )


def receipt_answer_deliver(
    receipt: ProviderReceipt, *, callback: str, reference: str, at: datetime | None = None
) -> None:
    """Apply the answer a receipt carries (none: nothing to do), as the callback would."""
    if receipt.outcome is not None:
        deliver_answer(
            callback=callback,
            reference=reference,
            provider_reference=receipt.provider_reference,
            outcome=receipt.outcome,
            reason=receipt.reason,
            at=at,
        )


class DisbursementOutcomeUnknown(Exception):
    """A disbursement past its timeout whose status the provider could not give: it stays
    pending (the timeout sweeps log it and ask again at their next run)."""

    def __init__(self, reference: str) -> None:
        super().__init__(f"Disbursement {reference}: the provider could not be asked its status")


def answer_before_timeout(
    *,
    kind: str,
    reference: str,
    callback: str,
    party: dict[str, str],
    at: datetime,
    connection: str = SIMULATOR,
) -> bool:
    """Before a leg the provider received is failed for want of an answer, ask the provider:
    an answer lost on its way (a callback never sent, a worker killed with it) is applied
    through the callback as if it had just arrived. True when there was one to apply; False
    when the provider is still working on it, or, for a collection, cannot be asked (the leg
    then times out). A disbursement the provider cannot be asked about raises
    DisbursementOutcomeUnknown: failing it would free money the provider may have paid out."""
    try:
        receipt = gateway(connection).transaction_status(kind=kind, reference=reference, **party)
    except Exception as error:  # whatever the provider's client raised: it could not be asked
        if kind == DISBURSEMENT:
            raise DisbursementOutcomeUnknown(reference) from error
        logger.warning("Status of %s %s not available", kind, reference, exc_info=True)
        return False
    if receipt.outcome is None:
        return False
    receipt_answer_deliver(receipt, callback=callback, reference=reference, at=at)
    return True

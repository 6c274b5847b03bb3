"""Writes of the transfers app, by capability: create, the state machine (transitions), the
legs at the provider (submission), relaunch-payout, the support actions and the beat's sweeps.
Every public name is re-exported here: other apps use `transfers.services.<name>`, and the
provider calls back through the dotted paths COLLECTION_CALLBACK and DISBURSEMENT_CALLBACK."""

from transfers.services.create import (
    KycNotApproved,
    SenderDetailsRequired,
    transfer_create,
)
from transfers.services.events import (
    aggregate_snapshot,
    payin_leg_snapshot,
    payout_leg_snapshot,
)
from transfers.services.postings import FX_CONVERSION, RETURNED_JOURNAL
from transfers.services.relaunch import (
    InvalidPayoutAmount,
    InvalidPayoutAmountPrecision,
    PayoutAmountAboveOriginal,
    transfer_relaunch_payout,
)
from transfers.services.submission import (
    COLLECTION_CALLBACK,
    DISBURSEMENT_CALLBACK,
    disbursement_reference,
    transfer_apply_collection_result,
    transfer_apply_disbursement_result,
    transfer_submit_collection,
    transfer_submit_disbursement,
)
from transfers.services.support import (
    CollectedFundsNotReturnable,
    ProviderCompletionNotApplicable,
    disbursement_stuck,
    transfer_apply_provider_completion,
    transfer_mark_disbursement_failed,
    transfer_return_collected_funds,
)
from transfers.services.sweeps import (
    ASK_PROVIDER_AFTER_SECONDS,
    RESUBMIT_AFTER_SECONDS,
    transfers_ask_overdue_answers,
    transfers_fail_timed_out,
    transfers_stale_submissions,
)
from transfers.services.transitions import (
    MOVES,
    REASON_COLLECTED_FUNDS_RETURNED,
    REASON_MARKED_FAILED,
    REASON_PROVIDER_COMPLETION_APPLIED,
    REASON_PROVIDER_TIMEOUT,
    StaleDisbursementAnswer,
    TransferNotRelaunchable,
    is_relaunchable,
    transfer_transition,
)

__all__ = [
    "ASK_PROVIDER_AFTER_SECONDS",
    "COLLECTION_CALLBACK",
    "DISBURSEMENT_CALLBACK",
    "FX_CONVERSION",
    "MOVES",
    "REASON_COLLECTED_FUNDS_RETURNED",
    "REASON_MARKED_FAILED",
    "REASON_PROVIDER_COMPLETION_APPLIED",
    "REASON_PROVIDER_TIMEOUT",
    "RESUBMIT_AFTER_SECONDS",
    "RETURNED_JOURNAL",
    "CollectedFundsNotReturnable",
    "InvalidPayoutAmount",
    "InvalidPayoutAmountPrecision",
    "KycNotApproved",
    "PayoutAmountAboveOriginal",
    "ProviderCompletionNotApplicable",
    "SenderDetailsRequired",
    "StaleDisbursementAnswer",
    "TransferNotRelaunchable",
    "aggregate_snapshot",
    "disbursement_reference",
    "disbursement_stuck",
    "is_relaunchable",
    "payin_leg_snapshot",
    "payout_leg_snapshot",
    "transfer_apply_collection_result",
    "transfer_apply_disbursement_result",
    "transfer_apply_provider_completion",
    "transfer_create",
    "transfer_mark_disbursement_failed",
    "transfer_relaunch_payout",
    "transfer_return_collected_funds",
    "transfer_submit_collection",
    "transfer_submit_disbursement",
    "transfer_transition",
    "transfers_ask_overdue_answers",
    "transfers_fail_timed_out",
    "transfers_stale_submissions",
]

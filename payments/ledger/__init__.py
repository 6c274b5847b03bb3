"""The double-entry ledger: the only code that moves money between accounts.

Every movement is a Journal of signed lines that sum to zero, scoped to one merchant and one
currency, tied to the resource that caused it. `(resource_type, resource_id, kind)` is unique:
posting the same movement twice (a retried task, a repeated provider answer) returns the first
journal and changes nothing.

Sign convention: a positive line credits the account (what Cowry owes grows), a negative line
debits it. The merchant's wallet balances are the credit balances of two accounts.

Account codes (per merchant and currency):

    merchant_available            the merchant's spendable balance      (= Wallet.available)
    merchant_reserved             debits held for payouts/refunds in flight    (= Wallet.reserved)
    provider_clearing:<OPERATOR>  money held/paid by one operator on our behalf; a collection
                                  debits it, a disbursement credits it
    fee_revenue                   Cowry's fees
    adjustments                   the counterpart of manual ops adjustments (credit_wallet,
                                  debit_wallet)
    transfer_suspense             (transfers app) money collected for a transfer, not yet paid out
                                  (or returned to the wallet: journal transfer_returned)

Movements posted by the payments app (journal kind: lines):

    payin_completed:   provider_clearing:OP -send, merchant_available +receive, fee_revenue +fee
    payout_reserved:   merchant_available -debit, merchant_reserved +debit        (at creation)
    payout_completed:  merchant_reserved -debit, provider_clearing:OP +send, fee_revenue +fee
    payout_released:   merchant_reserved -debit, merchant_available +debit        (on failure)
    refund_reserved:   merchant_available -amount, merchant_reserved +amount      (at creation)
    refund_completed:  merchant_reserved -amount, provider_clearing:OP +amount   (no fee back)
    refund_released:   merchant_reserved -amount, merchant_available +amount      (on failure)
    adjustment:        adjustments -amount, merchant_available +amount   (credit_wallet;
                       debit_wallet posts the opposite)
"""

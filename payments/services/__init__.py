"""Writes of the payments app, by capability: parties, payins, payouts, refunds, their provider
submission, the state machine (transitions) and the beat sweeps. Wallet adjustments and
provider discrepancies live in payments.ledger. Import a name from the module that defines it."""

"""Writes of the transfers app, by capability: create, the state machine (transitions), the
legs at the provider (submission), relaunch-payout, the support actions and the beat's sweeps.
Import a name from the module that defines it."""

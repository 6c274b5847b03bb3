"""Webhook endpoints, the event outbox and signed, retried delivery, by capability:
endpoints (URL, subscription, signing secret), events (record and fan out), delivery (claim,
send, record an attempt), sweeps (the beat's safety net) and resend.
Import a name from the module that defines it."""

"""What each error code and reason means and what the merchant should do (docs/errors.md).

A reason found in the code with no entry here fails tests/test_errors_reference.py.
"""

CODE_MEANINGS = {
    "bad_request": "The request was refused: invalid input or a business rule; see `reason`.",
    "unauthorized": "X-Api-Key / X-Api-Secret missing, wrong, revoked or expired.",
    "forbidden": "Not allowed (dashboard and CSRF only; the API answers 401 or 404).",
    "not_found": "No such resource for this merchant: another merchant's, or a malformed path id.",
    "method_not_allowed": "The path exists; the HTTP method does not.",
    "uri_too_long": "The request line (path and query) is longer than the server reads.",
    "expectation_failed": "An `Expect` header other than `100-continue`.",
    "request_header_fields_too_large": "A header, or all of them, is larger than the server reads.",
    "not_implemented": "A `Transfer-Encoding` the server does not implement.",
    "conflict": "The request clashes with the resource's state or with an Idempotency-Key.",
    "unsupported_media_type": "A body that is not `application/json` (KYC files are URLs).",
    "rate_limited": "Too many requests for this API key; wait `Retry-After` seconds.",
    "internal_error": "A fault on our side; nothing was half-done. Retry with the same key.",
    "service_unavailable": "The database is unreachable; retry after `Retry-After` seconds.",
}

FIX_INPUT = "Fix the request as `message` and `fields` say; retrying it unchanged fails again."
NEW_QUOTE = "Create a new quote with valid parameters (GET /operators, GET /corridors)."
OPS = "Ops commands and the dashboard only; correct the command's arguments."

# reason: (meaning, what to do)
GUIDANCE: dict[str, tuple[str, str]] = {
    # --- request shape and transport ---
    "bad_request": ("The request could not be read (Django-level 400).", FIX_INPUT),
    "invalid_request": ("A field is missing, malformed or out of range.", FIX_INPUT),
    "malformed_json": ("The body is not valid JSON.", "Send a JSON object, UTF-8 encoded."),
    "malformed_request": (
        "The HTTP request could not be parsed (refused before the API read it).",
        "Send well-formed HTTP/1.1: `Name: value` header lines, a valid request line.",
    ),
    "uri_too_long": (
        "The request line is over the server's limit (4094 bytes by default).",
        "Shorten the path and query; send long data in a JSON body.",
    ),
    "headers_too_large": (
        "A header line, or the number of headers, is over the server's limit.",
        "Send fewer or shorter headers (an API key and secret fit easily).",
    ),
    "expectation_failed": (
        "The request's `Expect` header is not `100-continue`.",
        "Drop the `Expect` header or send `Expect: 100-continue`.",
    ),
    "not_implemented": (
        "The request's `Transfer-Encoding` is not one the server implements.",
        "Send the body with Content-Length, or `Transfer-Encoding: chunked`.",
    ),
    "body_too_large": ("The body is larger than the accepted maximum.", "Send a smaller body."),
    "idempotency_key_missing": (
        "The POST needs an Idempotency-Key header (absent, empty or only spaces).",
        "Send a unique key per business intent (a UUID) and reuse it only to retry.",
    ),
    "idempotency_key_invalid": (
        "The Idempotency-Key is longer than 255 characters or not printable ASCII.",
        "Use 1 to 255 printable ASCII characters; a UUID is a good choice.",
    ),
    "idempotency_key_reused": (
        "The key was already used with a different method, path or body.",
        "Use a new key for a new intent; to retry, resend the original body exactly.",
    ),
    "request_in_progress": (
        "The first request with this key has not finished yet.",
        "Retry the same request with the same key after a short wait.",
    ),
    "invalid_credentials": (
        "The API key and secret do not match a working key.",
        "Check both headers; a revoked, expired or rotated-out key needs a new one.",
    ),
    "forbidden": ("The dashboard refused the action.", "Log in with a role that may do it."),
    "csrf_failed": ("A dashboard form was posted without its CSRF token.", "Reload the page."),
    "not_found": ("The resource does not exist for this merchant.", "Check the id and the key."),
    "method_not_allowed": ("This method is not served here.", "See /docs for the methods."),
    "unsupported_media_type": (
        "The body's Content-Type is not application/json.",
        "Send the body as JSON with `Content-Type: application/json`.",
    ),
    "rate_limited": ("Too many requests for this API key.", "Wait `Retry-After` seconds."),
    "internal_error": (
        "An unexpected fault; the request's changes were rolled back.",
        "Retry with the same Idempotency-Key; report the X-Request-Id if it persists.",
    ),
    "service_unavailable": (
        "The database could not be reached or dropped the connection; nothing was half-done.",
        "Retry with the same Idempotency-Key after `Retry-After` seconds.",
    ),
    # --- not found ---
    "customer_not_found": ("No such customer for this merchant.", "Create the customer first."),
    "quote_not_found": ("No such quote for this merchant.", "Create a quote first."),
    "payin_not_found": ("No such payin for this merchant.", "Check the payin id."),
    "payout_not_found": ("No such payout for this merchant.", "Check the payout id."),
    "transfer_not_found": ("No such transfer for this merchant.", "Check the transfer id."),
    "event_not_found": ("No such webhook event for this merchant.", "Check the event id."),
    # --- customers and KYC ---
    "duplicate_external_ref": (
        "Another customer of yours already has this external_ref.",
        "Fetch that customer (GET /customers?external_ref=...) instead of creating one.",
    ),
    "customer_blocked": (
        "The customer is blocked: no new quote or payment for them.",
        "Contact support; existing payments are unaffected.",
    ),
    "kyc_transition_not_allowed": (
        "This kyc_status change is not allowed from the current status.",
        "Read the customer's kyc_status and submit KYC documents instead.",
    ),
    "kyc_already_decided": ("The KYC already has that status.", OPS),
    "kyc_not_approved": (
        "The corridor needs the sender's KYC approved.",
        "Submit KYC documents (POST /customers/{id}/kyc) and wait for approval.",
    ),
    "sender_details_required": (
        "The corridor needs sender details that are missing (named in `fields`).",
        "Add them to the customer or send them as sender_* fields of the transfer.",
    ),
    # --- quotes: catalog ---
    "unknown_operator": ("No operator has this code.", NEW_QUOTE),
    "operator_inactive": ("The operator is switched off.", "Use another operator."),
    "operator_not_enabled": (
        "The operator is not enabled for your account.",
        "Use an enabled operator or ask support to enable it.",
    ),
    "operator_closed": ("The operator is in a closed window.", "Retry later."),
    "unknown_corridor": ("No transfer corridor joins these countries.", NEW_QUOTE),
    "corridor_inactive": ("The corridor is switched off.", "Use another corridor."),
    "corridor_not_enabled": (
        "The corridor is not enabled for your account.",
        "Ask support to enable it.",
    ),
    "operator_country_mismatch": ("The operator does not serve this country.", NEW_QUOTE),
    "currency_mismatch": ("The currency is not the operator's.", NEW_QUOTE),
    "rail_mismatch": ("The rail_type is not the operator's.", NEW_QUOTE),
    "payer_operator_mismatch": ("The payer operator is not in the corridor.", NEW_QUOTE),
    "recipient_operator_mismatch": ("The recipient operator is not in the corridor.", NEW_QUOTE),
    "payin_currency_mismatch": ("payin_currency is not the payer's currency.", NEW_QUOTE),
    "payout_currency_mismatch": ("payout_currency is not the recipient's currency.", NEW_QUOTE),
    "fx_rate_unavailable": (
        "No usable FX rate for this currency pair (or it rounds to zero).",
        "Use a same-currency corridor or ask support to configure the rate.",
    ),
    # --- quotes: amounts ---
    "amount_required": ("No amount was given.", "Send payin_amount or payout_amount."),
    "amount_ambiguous": ("Both payin_amount and payout_amount were sent.", "Send one."),
    "payin_currency_required": ("payin_amount came without payin_currency.", "Add it."),
    "send_field_conflict": ("send_* and payin_* disagree.", "Send one pair, or equal values."),
    "amount_below_minimum": (
        "Below the operator's minimum. `details`: amount, minimum, currency.",
        "Raise the amount.",
    ),
    "amount_above_maximum": (
        "Above the operator's maximum. `details`: amount, maximum, currency (none when no"
        " payin could pay for the payout_amount asked).",
        "Lower or split the amount.",
    ),
    "amount_too_small_for_fees": (
        "The fees would eat the amount. `details`: amount, fee, currency.",
        "Raise the amount.",
    ),
    "invalid_amount_precision": (
        "The amount has decimals the currency does not have (XAF and XOF: none).",
        "Send whole units.",
    ),
    "invalid_amount": ("payout_amount is not a valid amount.", FIX_INPUT),
    "payout_amount_above_original": (
        "A relaunch cannot pay out more than the original payout amount. `details`: requested,"
        " original, currency.",
        "Send at most the original amount, or omit payout_amount.",
    ),
    # --- quotes used by payments ---
    "payin_not_refundable": (
        "Only a completed payin can be refunded; this one is pending or failed (or the "
        "provider reported its collection failed after all).",
        "Wait for payin.completed; a failed payin took no money, so there is nothing to return "
        "(a reversal: contact support).",
    ),
    "refund_exceeds_payin": (
        "The amount is more than the payin's amount less its refunds that have not failed "
        "(or that the provider paid after they failed). `details`: refundable, requested,"
        " currency.",
        "Refund at most the remainder: GET /payins/{id} shows refunded_amount and refunds.",
    ),
    "refund_not_found": (
        "No such refund for this merchant.",
        "Check the refund id; use GET /refunds to list yours.",
    ),
    "phone_invalid": (
        "The number cannot be parsed as a phone number with its country code.",
        "Send the number in E.164 form, e.g. +221770001234.",
    ),
    "operator_unknown": (
        "The number is valid but its country or network is not in the catalog.",
        "Ask the payer for a number on a covered network (GET /operators).",
    ),
    "team_change_refused": (
        "Dashboard only: a team change that would leave no owner, or remove yourself.",
        "Ask another owner, or keep one owner on the team.",
    ),
    "quote_expired": ("The quote's 15 minutes are over.", "Create a new quote."),
    "quote_consumed": ("The quote already paid for a payment.", "Create a new quote."),
    "quote_flow_mismatch": ("The quote is for another flow (payin/payout/transfer).", NEW_QUOTE),
    "quote_customer_mismatch": ("The quote was made for another customer.", NEW_QUOTE),
    "party_routing_mismatch": (
        "The payer or recipient's country, rail or operator is not the quote's.",
        "Omit the routing fields (they come from the quote) or send the quote's values.",
    ),
    # --- money ---
    "insufficient_balance": (
        "The wallet's available balance does not cover the amount plus fees. `details`:"
        " available, requested (what the operation needs of it), currency.",
        "Collect funds first (payins) or lower the amount; see GET /balances.",
    ),
    "balance_out_of_range": ("The balance would pass what the ledger holds.", "Contact support."),
    "invalid_statement_range": (
        "`from` and `to` are more than 31 days apart, or `to` is the last date there is (a"
        " missing one is `invalid_request` naming it; `to` before `from` is an empty statement).",
        "Ask for at most 31 days per statement and page through longer periods.",
    ),
    "invalid_transition": (
        "The resource's status does not allow this move.",
        "Read the resource; its status is final or the move is not allowed from it.",
    ),
    # --- transfers ---
    "transfer_not_relaunchable": (
        "Only a transfer whose payout leg failed after collection can be relaunched.",
        "Read the transfer's status, payin_status and payout_status first.",
    ),
    "collected_funds_not_returnable": (
        "Only a failed transfer's collected funds can go back to the wallet.",
        "Read the transfer; relaunch it or wait for its legs to settle.",
    ),
    "provider_completion_not_applicable": ("No late provider completion to apply.", OPS),
    # --- webhooks ---
    "invalid_webhook_url": (
        "The webhook URL is malformed, not https in production, or points to a private address.",
        "Use a public https URL.",
    ),
    "invalid_signing_secret": ("The secret is shorter than 16 printable characters.", OPS),
    "too_many_webhook_endpoints": ("At most 5 webhook endpoints per merchant.", OPS),
    "invalid_event_types": ("An event type is unknown.", "Use the names listed in /docs."),
    "webhook_not_configured": (
        "No enabled webhook endpoint to resend to.",
        "Configure or re-enable an endpoint in the dashboard, then resend.",
    ),
    "no_webhook_endpoint": (
        "No enabled endpoint is subscribed to this event.",
        "Subscribe an endpoint to the event type, then resend.",
    ),
    # --- ops commands and dashboard ---
    "invalid_name": ("The merchant name is empty or too long.", OPS),
    "duplicate_merchant_name": ("A merchant with this name exists.", OPS),
    "invalid_label": ("The API key label is too long.", OPS),
    "invalid_expiry": ("The API key expiry is in the past.", OPS),
    "api_key_not_active": ("The key is revoked or expired.", OPS),
    "api_key_already_rotated": ("The key was already rotated.", OPS),
    "invalid_staff": ("The staff user's details are invalid.", OPS),
    "invalid_role": ("The role is not owner, developer or viewer.", OPS),
    "invalid_adjustment": ("The wallet adjustment is incomplete.", OPS),
    "adjustment_reference_used": ("The adjustment reference was already used.", OPS),
    "discrepancy_not_creditable": ("This discrepancy cannot be settled by a credit.", OPS),
    "discrepancy_not_debitable": ("This discrepancy cannot be settled by a debit.", OPS),
}

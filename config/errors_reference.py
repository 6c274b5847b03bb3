"""The error reference: every error `code` and `reason` the service can answer, found in the code.

Reasons come from the DomainError subclasses listed in error_classes() (a test fails when one is
missing), from `DomainError(..., reason="...")` raised ad hoc, from the HTTP-level errors of
core/exceptions.py, and from what gunicorn refuses before Django (config/gunicorn_worker.py).
What each means and what to do is written in GUIDANCE; docs/errors.md is this module's output
(`python -m config.errors_reference --write`), and a test fails when it is stale or a reason
has no guidance.
"""

import ast
import functools
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The packages whose source is read for ad hoc `SomeError(..., reason="...")` calls.
SOURCES = ("core", "merchants", "customers", "kyc", "webhooks", "quotes", "payments", "transfers")
DOC = ROOT / "docs" / "errors.md"


@dataclass
class Entry:
    reason: str
    status: int
    code: str
    message: str = ""
    raised_by: set[str] = field(default_factory=set)


@functools.cache
def error_classes() -> tuple[type, ...]:
    """Every error class the service answers with, the kernel's first, then the apps' in their
    order; imported here, once Django is set up."""
    from core.exceptions import DomainError, NotFound
    from core.transitions import InvalidTransition
    from customers.selectors import CustomerBlocked, CustomerNotFound, CustomerNotFoundForPayment
    from customers.services import DuplicateExternalRef
    from kyc.services import KycAlreadyDecided
    from kyc.status import KycTransitionRefused
    from merchants.idempotency import (
        IdempotencyKeyInvalid,
        IdempotencyKeyMissing,
        IdempotencyKeyReused,
        RequestInProgress,
    )
    from merchants.services import DuplicateMerchantName, InvalidCredentials
    from merchants.team import TeamChangeRefused
    from payments.ledger.adjustments import (
        AdjustmentReferenceUsed,
        DiscrepancyNotCreditable,
        DiscrepancyNotDebitable,
        InvalidAdjustment,
    )
    from payments.ledger.journals import BalanceOutOfRange, InsufficientBalance
    from payments.selectors import PayinNotFound, PayoutNotFound, RefundNotFound
    from payments.services.parties import PartyInvalid, PartyRoutingMismatch
    from payments.services.payouts import PayoutNotStuck
    from payments.services.refunds import PayinNotRefundable, RefundExceedsPayin
    from payments.statements import InvalidStatementRange
    from quotes.prediction import OperatorUnknown, PhoneInvalid
    from quotes.quote_pricing import (
        AmountAboveMaximum,
        AmountBelowMinimum,
        AmountTooSmallForFees,
        BadRequest,
        FxRateUnavailable,
        InvalidAmountPrecision,
    )
    from quotes.selectors import (
        CorridorInactive,
        CorridorNotEnabled,
        OperatorClosed,
        OperatorInactive,
        OperatorNotEnabled,
        QuoteNotFound,
        UnknownCorridor,
        UnknownOperator,
    )
    from quotes.services import (
        AmountAmbiguous,
        AmountRequired,
        CurrencyMismatch,
        OperatorCountryMismatch,
        PayerOperatorMismatch,
        PayinCurrencyMismatch,
        PayinCurrencyRequired,
        PayoutCurrencyMismatch,
        QuoteConsumed,
        QuoteCustomerMismatch,
        QuoteExpired,
        QuoteFlowMismatch,
        QuoteNotFoundForPayment,
        RailMismatch,
        RecipientOperatorMismatch,
        SendFieldConflict,
    )
    from transfers.selectors import TransferNotFound
    from transfers.services.create import KycNotApproved, SenderDetailsRequired
    from transfers.services.relaunch import (
        InvalidPayoutAmount,
        InvalidPayoutAmountPrecision,
        PayoutAmountAboveOriginal,
    )
    from transfers.services.support import (
        CollectedFundsNotReturnable,
        ProviderCompletionNotApplicable,
    )
    from transfers.services.transitions import TransferNotRelaunchable
    from webhooks.selectors import EventNotFound
    from webhooks.services.endpoints import (
        InvalidEventTypes,
        InvalidSigningSecret,
        InvalidWebhookUrl,
        TooManyWebhookEndpoints,
        WebhookNotConfigured,
    )
    from webhooks.services.resend import NoWebhookEndpoint

    return (
        DomainError,
        NotFound,
        IdempotencyKeyMissing,
        IdempotencyKeyInvalid,
        IdempotencyKeyReused,
        RequestInProgress,
        InvalidCredentials,
        DuplicateMerchantName,
        TeamChangeRefused,
        CustomerNotFound,
        CustomerNotFoundForPayment,
        CustomerBlocked,
        DuplicateExternalRef,
        KycAlreadyDecided,
        KycTransitionRefused,
        EventNotFound,
        InvalidWebhookUrl,
        InvalidSigningSecret,
        WebhookNotConfigured,
        TooManyWebhookEndpoints,
        InvalidEventTypes,
        NoWebhookEndpoint,
        PhoneInvalid,
        OperatorUnknown,
        BadRequest,
        InvalidAmountPrecision,
        AmountBelowMinimum,
        AmountAboveMaximum,
        FxRateUnavailable,
        AmountTooSmallForFees,
        QuoteNotFound,
        UnknownOperator,
        OperatorInactive,
        OperatorNotEnabled,
        OperatorClosed,
        UnknownCorridor,
        CorridorInactive,
        CorridorNotEnabled,
        OperatorCountryMismatch,
        CurrencyMismatch,
        RailMismatch,
        PayerOperatorMismatch,
        RecipientOperatorMismatch,
        PayinCurrencyMismatch,
        PayoutCurrencyMismatch,
        PayinCurrencyRequired,
        AmountRequired,
        AmountAmbiguous,
        SendFieldConflict,
        QuoteNotFoundForPayment,
        QuoteExpired,
        QuoteConsumed,
        QuoteFlowMismatch,
        QuoteCustomerMismatch,
        InvalidAdjustment,
        AdjustmentReferenceUsed,
        DiscrepancyNotCreditable,
        DiscrepancyNotDebitable,
        InsufficientBalance,
        BalanceOutOfRange,
        PayinNotFound,
        PayoutNotFound,
        RefundNotFound,
        PartyInvalid,
        PartyRoutingMismatch,
        PayoutNotStuck,
        PayinNotRefundable,
        RefundExceedsPayin,
        InvalidTransition,
        InvalidStatementRange,
        TransferNotFound,
        SenderDetailsRequired,
        KycNotApproved,
        PayoutAmountAboveOriginal,
        InvalidPayoutAmount,
        InvalidPayoutAmountPrecision,
        ProviderCompletionNotApplicable,
        CollectedFundsNotReturnable,
        TransferNotRelaunchable,
    )


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _reason_keyword(node: ast.Call) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == "reason"), None)


def _ad_hoc_raises(error_names: set[str]) -> list[tuple[str, str, str]]:
    """(callee, reason, module) of each `SomeError(..., reason="...")` call in the apps, also
    through a helper that passes its own `reason` argument on to an error."""
    files = tuple(
        (path, path.stat().st_mtime_ns)
        for package in SOURCES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    )
    return _scan(frozenset(error_names), files)


@functools.lru_cache(maxsize=4)
def _scan(error_names: frozenset[str], files: tuple) -> list[tuple[str, str, str]]:
    """The scan itself, done again only when a file or the error classes change (/schema and
    /docs ask on every load)."""
    trees = {path: ast.parse(path.read_text(), filename=str(path)) for path, _ in files}
    callees = dict.fromkeys(error_names, "")
    for tree in trees.values():
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call) and _call_name(node) in error_names:
                    passed = _reason_keyword(node)
                    if isinstance(passed, ast.Name) and passed.id == "reason":
                        callees[func.name] = _call_name(node)
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) in callees:
                reason = _reason_keyword(node)
                if isinstance(reason, ast.Constant) and isinstance(reason.value, str):
                    name = _call_name(node)
                    found.append((callees[name] or name, reason.value, str(path.relative_to(ROOT))))
    return found


def _http_level() -> list[Entry]:
    """The reasons core/exceptions.py gives DRF's and Django's own errors."""
    from core import exceptions

    tree = ast.parse(inspect.getsource(exceptions))
    entries = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or getattr(node.func, "id", "") not in (
            "error_body",
            "json_error_view",
        ):
            continue
        args = [a.value for a in node.args if isinstance(a, ast.Constant)]
        reason = next(
            (
                k.value.value
                for k in node.keywords
                if k.arg == "reason" and isinstance(k.value, ast.Constant)
            ),
            args[2] if len(args) > 2 else None,
        )
        if not args or not isinstance(args[0], int) or not reason:
            continue
        status = args[0]
        message = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
        entries.append(Entry(reason, status, exceptions.CODE_BY_STATUS[status], message))
    return entries


def _gunicorn_level() -> list[Entry]:
    """The reasons config.gunicorn_worker gives what gunicorn refuses before Django."""
    from config import gunicorn_worker
    from core import exceptions

    return [
        Entry(reason, status, exceptions.CODE_BY_STATUS[status])
        for status, reason in gunicorn_worker.REASON_BY_STATUS.items()
    ]


def discover() -> dict[tuple[int, str], Entry]:
    """Every (status, reason) the code can answer, in that order; django.setup() must have run.
    A reason answered with two statuses (customer_not_found: 404 for a path id, 400 for an id
    in the body) is two entries, each from an error class that declares its status."""
    from core.exceptions import CODE_BY_STATUS

    classes = error_classes()
    entries: dict[tuple[int, str], Entry] = {}

    def add(reason: str, status: int, message: str, raised_by: str) -> None:
        entry = entries.setdefault(
            (status, reason), Entry(reason, status, CODE_BY_STATUS.get(status, "error"), message)
        )
        entry.raised_by.add(raised_by)

    by_name = {}
    for cls in classes:
        by_name.setdefault(cls.__name__, cls)
        if cls.reason:
            add(cls.reason, cls.status, cls.message, f"{cls.__module__}.{cls.__qualname__}")
    for name, reason, module in _ad_hoc_raises(set(by_name)):
        cls = by_name[name]
        add(reason, cls.status, "", f"{module} ({name})")
    for entry in _http_level():
        existing = entries.setdefault((entry.status, entry.reason), entry)
        existing.raised_by.add("core.exceptions")
    for entry in _gunicorn_level():
        existing = entries.setdefault((entry.status, entry.reason), entry)
        existing.raised_by.add("config.gunicorn_worker")
    return dict(sorted(entries.items()))


def reasons() -> set[str]:
    """Every reason the code can answer, whatever its status."""
    return {reason for _status, reason in discover()}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


ERROR_SHAPE = """Every error answer has one shape:

```json
{"error": {"code": "bad_request", "message": "A sentence for a human.",
           "reason": "insufficient_balance", "fields": {"amount": ["..."]}}}
```

`code` follows the HTTP status; `reason` is the stable, machine-readable cause (branch on it,
never on `message`); `fields` names the request fields at fault, when there are; `details`
gives the figures of a refusal about an amount (amounts as strings, and the currency), named
below with its reason: e.g. `insufficient_balance` carries
`"details": {"available": "850", "requested": "10000", "currency": "XOF"}`."""


def render_reasons_table() -> str:
    """The error reference as Markdown, for docs/errors.md and the OpenAPI description."""
    from config.errors_guidance import CODE_MEANINGS, GUIDANCE
    from core.exceptions import CODE_BY_STATUS

    lines = ["## Errors", "", ERROR_SHAPE, "", "| Status | code | Meaning |", "|---|---|---|"]
    for status, code in sorted(CODE_BY_STATUS.items()):
        lines.append(f"| {status} | `{code}` | {_cell(CODE_MEANINGS[code])} |")
    lines += ["", "| Status | code | reason | Meaning | What to do |", "|---|---|---|---|---|"]
    for (_status, reason), entry in discover().items():
        meaning, todo = GUIDANCE[reason]
        lines.append(
            f"| {entry.status} | `{entry.code}` | `{reason}` | {_cell(meaning)} | {_cell(todo)} |"
        )
    return "\n".join(lines)


def render_markdown() -> str:
    header = [
        "# Error reference",
        "",
        "<!-- Generated by `python -m config.errors_reference --write`; do not edit by hand. -->",
        "",
        "Also in the API's own documentation at `/docs` (and in `/schema`).",
        "",
    ]
    return "\n".join(header) + render_reasons_table() + "\n"


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    text = render_markdown()
    if "--write" in sys.argv:
        DOC.write_text(text)
    else:
        sys.stdout.write(text)

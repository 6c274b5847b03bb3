"""Statements: the merchant's ledger lines on its wallet accounts, as CSV (GET /statements and
the dashboard's wallet export). Read-only; one query per table whatever the number of lines."""

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from uuid import UUID

from django.db.models import Sum
from django.utils import timezone

from core import money
from core.exceptions import DomainError
from core.fields import format_timestamp
from merchants.models import Merchant
from payments.ledger.accounts import FEE_REVENUE, MERCHANT_AVAILABLE, MERCHANT_RESERVED
from payments.models import Journal, JournalLine, Payin, Payout, Refund

MAX_DAYS = 31
WALLET_ACCOUNTS = (MERCHANT_AVAILABLE, MERCHANT_RESERVED)
COLUMNS = (
    "created_at",
    "journal_id",
    "kind",
    "resource_type",
    "resource_id",
    "provider_reference",
    "account",
    "amount",
    "fee",
    "balance_after",
)
# A provider reference starting with one of these is prefixed with ' (spreadsheet formulas).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


class InvalidStatementRange(DomainError):
    status = 400
    reason = "invalid_statement_range"
    message = f"Give `from` and `to` dates at most {MAX_DAYS} days apart."


@dataclass(frozen=True)
class StatementLine:
    created_at: datetime
    journal_id: UUID
    kind: str
    resource_type: str
    resource_id: UUID
    provider_reference: str
    account: str
    amount: Decimal
    fee: Decimal
    balance_after: Decimal


def statement_bounds(*, from_date: date, to_date: date) -> tuple[datetime, datetime]:
    """[start of from_date, start of the day after to_date) in the project's time zone (UTC),
    empty when to_date is before from_date; InvalidStatementRange past MAX_DAYS days (both ends
    included)."""
    if (to_date - from_date).days + 1 > MAX_DAYS:
        message = f"A statement covers at most {MAX_DAYS} days."
        raise InvalidStatementRange(message, fields={"to": [message]})
    if to_date >= date.max:  # the range ends at the start of the day after `to`
        message = "`to` is out of range."
        raise InvalidStatementRange(message, fields={"to": [message]})
    zone = timezone.get_default_timezone()
    start = datetime.combine(from_date, time.min, tzinfo=zone)
    end = datetime.combine(to_date + timedelta(days=1), time.min, tzinfo=zone)
    return start, max(start, end)


# resource_type -> the provider references of its journals among `journals`, keyed by
# (resource_type, resource_id, kind): apps above payments add theirs (references_register).
_MORE_REFERENCES: dict[str, Callable[[list[Journal]], dict[tuple[str, UUID, str], str]]] = {}


def references_register(
    resource_type: str, references: Callable[[list[Journal]], dict[tuple[str, UUID, str], str]]
) -> None:
    """An app above payments gives the provider references of its own journals' lines."""
    _MORE_REFERENCES[resource_type] = references


def _references(lines: list[JournalLine]) -> dict[tuple[str, UUID, str], str]:
    """provider_reference per (resource_type, resource_id, kind), joined through the payin or
    payout (or a registered app's resource) that caused the journal."""
    journals: dict[str, list[Journal]] = defaultdict(list)
    for line in lines:
        journals[line.journal.resource_type].append(line.journal)
    found: dict[tuple[str, UUID, str], str] = {}
    for model, resource_type in ((Payin, "payin"), (Payout, "payout"), (Refund, "refund")):
        ids = {journal.resource_id for journal in journals[resource_type]}
        references = dict(model.objects.filter(pk__in=ids).values_list("id", "provider_reference"))
        for journal in journals[resource_type]:
            key = (resource_type, journal.resource_id, journal.kind)
            found[key] = references.get(journal.resource_id, "")
    for resource_type, references_of in _MORE_REFERENCES.items():
        if journals[resource_type]:
            found.update(references_of(journals[resource_type]))
    return found


def statement_lines(
    *, merchant: Merchant, currency: str, from_date: date, to_date: date
) -> list[StatementLine]:
    """The merchant's ledger lines on merchant_available and merchant_reserved in `currency`,
    journals created in [from_date, to_date] (whole days; none when to_date is before
    from_date), oldest first. `fee` is what the line's journal credited to fee_revenue;
    `balance_after` is the running merchant_available balance after the line (an opening
    balance summed from every earlier line)."""
    start, end = statement_bounds(from_date=from_date, to_date=to_date)
    wallet_lines = JournalLine.objects.filter(
        account__merchant=merchant, account__currency=currency, account__code__in=WALLET_ACCOUNTS
    )
    opening = wallet_lines.filter(
        account__code=MERCHANT_AVAILABLE, journal__created_at__lt=start
    ).aggregate(total=Sum("amount"))["total"] or Decimal(0)
    lines = list(
        wallet_lines.filter(journal__created_at__gte=start, journal__created_at__lt=end)
        .select_related("journal", "account")
        .order_by("journal__created_at", "journal_id", "id")
    )
    fees = dict(
        JournalLine.objects.filter(
            journal_id__in={line.journal_id for line in lines}, account__code=FEE_REVENUE
        )
        .values("journal_id")
        .annotate(total=Sum("amount"))
        .values_list("journal_id", "total")
    )
    references = _references(lines)
    balance = opening
    rows = []
    for line in lines:
        journal = line.journal
        if line.account.code == MERCHANT_AVAILABLE:
            balance += line.amount
        rows.append(
            StatementLine(
                created_at=journal.created_at,
                journal_id=journal.id,
                kind=journal.kind,
                resource_type=journal.resource_type,
                resource_id=journal.resource_id,
                provider_reference=references.get(
                    (journal.resource_type, journal.resource_id, journal.kind), ""
                ),
                account=line.account.code,
                amount=line.amount,
                fee=fees.get(journal.id) or Decimal(0),
                balance_after=balance,
            )
        )
    return rows


def statement_csv(lines: Iterable[StatementLine]) -> str:
    """The CSV text: a header row, then one row per line; amounts as DecimalStrings (a debit
    is negative), times in ISO 8601."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for line in lines:
        writer.writerow(
            [
                format_timestamp(line.created_at),
                line.journal_id,
                line.kind,
                line.resource_type,
                line.resource_id,
                _safe(line.provider_reference),
                line.account,
                _signed(line.amount),
                _signed(line.fee),
                _signed(line.balance_after),
            ]
        )
    return out.getvalue()


def _signed(amount: Decimal) -> str:
    text = money.format_amount(abs(amount))
    return f"-{text}" if amount < 0 else text


def _safe(text: str) -> str:
    """No spreadsheet formula injection from a provider-supplied reference: OWASP's list of
    leading characters, with tab and line breaks, which spreadsheets skip before a formula."""
    return f"'{text}" if text[:1] in FORMULA_STARTS else text

import sys

from django.core.management.base import CommandError

from core.ops import OpsCommand
from rails import selectors
from rails.models import ConnectionKind
from rails.mtn_momo import COLLECTION, DISBURSEMENT, MtnClient, MtnRefused, MtnUnavailable


class Command(OpsCommand):
    help = (
        "Check a provider connection: a fresh token for each product, the disbursement account's"
        " balance and, with --msisdn, whether that account holder is active. Exit 0 only when"
        " every step is OK."
    )

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--msisdn", help="digits of an account holder's number, no '+'")

    def run(self, *, name: str, msisdn: str | None, **_) -> None:
        selectors.memo_forget()
        try:
            connection = selectors.connection_settings(name)
        except KeyError:
            raise CommandError(f"No connection named {name!r}.") from None
        if connection.kind != ConnectionKind.MTN_MOMO:
            raise CommandError(
                f"Connection {name!r} is of kind {connection.kind}: nothing to check."
            )
        if msisdn is not None and not msisdn.isdigit():
            raise CommandError("--msisdn takes digits only (no '+').")
        client = MtnClient(connection)
        steps = [
            (f"{COLLECTION} token", lambda: client.token(COLLECTION, fresh=True) and ""),
            (f"{DISBURSEMENT} token", lambda: client.token(DISBURSEMENT, fresh=True) and ""),
            (f"{DISBURSEMENT} balance", lambda: _balance(client)),
        ]
        if msisdn:
            steps.append(("account holder", lambda: _holder(client, msisdn)))
        results = [_step(label, check) for label, check in steps]
        self.emit(
            {
                "name": name,
                "ok": all(ok for _, ok, _ in results),
                "steps": [
                    {"step": label, "ok": ok, "detail": detail} for label, ok, detail in results
                ],
            },
            "\n".join(
                f"{'OK  ' if ok else 'FAIL'} {label}: {detail}" for label, ok, detail in results
            ),
        )
        if not all(ok for _, ok, _ in results):
            sys.exit(1)


def _balance(client: MtnClient) -> str:
    balance = client.balance(DISBURSEMENT)
    return f"{balance.get('availableBalance')} {balance.get('currency')}"


def _holder(client: MtnClient, msisdn: str) -> str:
    if not client.account_holder_active(COLLECTION, msisdn):
        raise MtnRefused("account holder", 200, "NOT_ACTIVE")
    return f"{msisdn} is active"


def _step(label: str, check) -> tuple[str, bool, str]:
    try:
        return label, True, check() or "ok"
    except MtnUnavailable as down:
        return label, False, down.why
    except MtnRefused as refused:
        return label, False, f"refused ({refused.code})"

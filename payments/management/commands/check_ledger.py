from django.core.management.base import CommandError
from django.utils import timezone

from core.ops import OpsCommand
from payments.ledger.checks import ledger_check_recorded


class Command(OpsCommand):
    help = "Verify every ledger invariant; exits non-zero on a breach."

    def run(self, **_) -> None:
        report = ledger_check_recorded(at=timezone.now())
        if report["ok"]:
            text = f"Ledger OK: {report['journals']} journals, {report['wallets']} wallets."
        else:
            text = "\n".join([f"LEDGER BREACH ({len(report['breaches'])}):", *report["breaches"]])
        self.emit(report, text)
        if not report["ok"]:
            raise CommandError(f"{len(report['breaches'])} ledger breaches.")

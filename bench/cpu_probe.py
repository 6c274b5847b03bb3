"""One tree's side of `make bench-cpu` (bench/cpu.py starts it in the tree it measures, on its
own database): it reads one step name a line on stdin, runs that step of a payment in this
process and answers one JSON line: CPU (time.process_time, ms), SQL statements sent, status.

Steps, in the order the driver asks them each round (a payment, then its refund and a payout):
quote (POST /quotes/payin), payin (POST /payins), read (GET /payins/{id}), submit (the
`submit_payin` task's body: the provider's instant answer, completion, event, fan-out and
whatever the tree does there), deliver (the `deliver_webhook` task's body for each delivery of
the payin's events still pending, to the receiver over a real socket), answer (a provider's
answer completing another payin, already pending: the completion alone), refund (POST
/payins/{id}/refunds, full), payout_quote (POST /quotes/payout) and payout (POST /payouts).
Requests go through Django's test client: the whole middleware stack, no network."""

import json
import os
import sys
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from payments.services.payins import payin_apply_provider_result, payin_transition  # noqa: E402
from payments.tasks import submit_payin  # noqa: E402
from webhooks.models import Delivery  # noqa: E402
from webhooks.tasks import deliver_webhook  # noqa: E402

QUOTE = {
    "country_code": "SN",
    "operator_code": "SN_ORANGE_MOMO",
    "rail_type": "mobile_money",
    "send_amount": "10000",
    "send_currency": "XOF",
}
PHONE = "+221770001234"


class Statements:
    """Counts the statements this connection sends (an execute wrapper: no SQL kept)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


class Payment:
    def __init__(self, key: str, secret: str) -> None:
        self.client = Client(HTTP_X_API_KEY=key, HTTP_X_API_SECRET=secret, SERVER_NAME="127.0.0.1")
        customer = self.post("/customers", {"first_name": "Awa", "last_name": "Diallo"})
        self.customer_id = customer.json()["id"]
        self.quote_id = self.payin_id = self.payout_quote_id = self.answered_id = ""
        self.deliveries: list[str] = []

    def post(self, path: str, body: dict):
        return self.client.post(
            path,
            json.dumps(body),
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )

    def quote(self):
        response = self.post("/quotes/payin", {**QUOTE, "customer_id": self.customer_id})
        self.quote_id = response.json()["id"]
        return response.status_code

    def payin(self):
        body = {
            "quote_id": self.quote_id,
            "customer_id": self.customer_id,
            "source": {"phone": PHONE},
        }
        response = self.post("/payins", body)
        self.payin_id = response.json()["id"]
        return response.status_code

    def read(self):
        return self.client.get(f"/payins/{self.payin_id}").status_code

    def submit(self):
        submit_payin.run(payin_id=self.payin_id)
        return 200

    def answer(self):
        payin_apply_provider_result(
            reference=self.answered_id,
            provider_reference="SIM-" + self.answered_id.replace("-", "")[:20],
            outcome="completed",
            reason="",
            at=timezone.now(),
        )
        return 200

    def deliver(self):
        for delivery_id in self.deliveries:
            deliver_webhook.run(delivery_id=delivery_id)
        return 200

    def refund(self):
        return self.post(f"/payins/{self.payin_id}/refunds", {}).status_code

    def payout_quote(self):
        response = self.post("/quotes/payout", {**QUOTE, "customer_id": self.customer_id})
        self.payout_quote_id = response.json()["id"]
        return response.status_code

    def payout(self):
        body = {
            "quote_id": self.payout_quote_id,
            "customer_id": self.customer_id,
            "payment_reason_code": "SALARY",
            "recipient": {
                "recipient_type": "individual",
                "first_name": "Moussa",
                "last_name": "Ndiaye",
                "phone": PHONE,
            },
        }
        return self.post("/payouts", body).status_code

    def before(self, step: str) -> None:
        """What a step needs that is not its cost: the deliveries the worker would take, a
        pending payin for the answer."""
        if step == "answer":
            quote = self.post("/quotes/payin", {**QUOTE, "customer_id": self.customer_id})
            body = {
                "quote_id": quote.json()["id"],
                "customer_id": self.customer_id,
                "source": {"phone": PHONE},
            }
            self.answered_id = self.post("/payins", body).json()["id"]
            payin_transition(payin_id=self.answered_id, to="pending", at=timezone.now())
        if step == "deliver":
            self.deliveries = [
                str(i)
                for i in Delivery.objects.filter(
                    event__data_id=self.payin_id, status="pending"
                ).values_list("id", flat=True)
            ]


def main() -> None:
    key, secret = sys.argv[1], sys.argv[2]
    payment = Payment(key, secret)
    statements = Statements()
    connection.ensure_connection()
    for line in sys.stdin:
        step = line.strip()
        payment.before(step)
        with connection.execute_wrapper(statements):
            sent = statements.count
            started = time.process_time()
            status = getattr(payment, step)()
            ms = (time.process_time() - started) * 1000
        print(json.dumps({"ms": ms, "statements": statements.count - sent, "status": status}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()

"""Queries per endpoint, measured in-process against the bench database with Django's test
client and the merchant's real credentials. Run by the harness through `manage.py shell`:

    exec(open("bench/queries.py").read()); print(json.dumps(measure(KEY, SECRET, CUSTOMER_ID)))
"""

import json
import uuid

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext


def measure(key: str, secret: str, customer_id: str) -> dict:
    client = Client(HTTP_X_API_KEY=key, HTTP_X_API_SECRET=secret, SERVER_NAME="127.0.0.1")

    def run(label: str, method: str, path: str, body: dict | None = None):
        headers = {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())} if method == "post" else {}
        with CaptureQueriesContext(connection) as ctx:
            if method == "post":
                response = client.post(
                    path, json.dumps(body), content_type="application/json", **headers
                )
            else:
                response = client.get(path)
        out[label] = {
            "status": response.status_code,
            "queries": len(ctx.captured_queries),
            "sql": [q["sql"][:160] for q in ctx.captured_queries],
        }
        return response.json() if response.content else None

    out: dict = {}
    quote_body = {
        "country_code": "SN",
        "operator_code": "SN_ORANGE_MOMO",
        "rail_type": "mobile_money",
        "send_amount": "10000",
        "send_currency": "XOF",
        "customer_id": customer_id,
    }
    run("POST /bench/floor", "post", "/bench/floor", {"note": "q"})
    quote = run("POST /quotes/payin", "post", "/quotes/payin", quote_body)
    run("GET /quotes/{id}", "get", f"/quotes/{quote['id']}")
    payin = run(
        "POST /payins",
        "post",
        "/payins",
        {"quote_id": quote["id"], "customer_id": customer_id, "source": {"phone": "+221770001999"}},
    )
    run("GET /payins/{id}", "get", f"/payins/{payin['id']}")
    run("POST /customers", "post", "/customers", {"first_name": "Q", "last_name": "Count"})
    run("GET /customers/{id}", "get", f"/customers/{customer_id}")
    return out

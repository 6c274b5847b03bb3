"""A local webhook receiver for the bench and the soak, run as its own process:

    python bench/receiver.py PORT [--fail-rate 0.3] [--max-failures-per-id 3] [--secret S]

POST /hook           records (arrival time.time(), event, data.id, webhook id, answer) and
                     answers 200, or 500 with probability --fail-rate (at most
                     --max-failures-per-id times for one webhook id, so a soak can drain);
                     with --secret it verifies X-Cowry-Signature over the raw body first.
GET  /arrivals       every recorded arrival as JSON (?since=<index> for the tail)
GET  /wait/{event}/{data_id}
                     long-poll: answers {"at": arrival time} once that event for that resource
                     was received with a 200 (?timeout=<seconds>, default 30; 504 after it)
POST /config         {"fail_rate": 0.0} changes the failure rate on the fly
GET  /files/doc.png  a small PNG, for KYC file URLs in the soak
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import random
import time
from collections import Counter

from aiohttp import web

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def build_app(*, fail_rate: float, max_failures_per_id: int, secret: str | None) -> web.Application:
    state = {"fail_rate": fail_rate}
    arrivals: list[list] = []
    failures: Counter[str] = Counter()
    bad_signatures = Counter()
    rng = random.Random(20240601)
    received_at: dict[tuple[str, str], float] = {}  # (event, data id) -> first 200 arrival
    waiters: dict[tuple[str, str], asyncio.Event] = {}

    async def hook(request: web.Request) -> web.Response:
        now = time.time()
        raw = await request.read()
        webhook_id = request.headers.get("X-Cowry-Webhook-Id", "")
        if secret is not None:
            timestamp = request.headers.get("X-Cowry-Timestamp", "")
            expected = (
                "sha256="
                + hmac.new(
                    secret.encode(), timestamp.encode() + b"." + raw, hashlib.sha256
                ).hexdigest()
            )
            if not hmac.compare_digest(expected, request.headers.get("X-Cowry-Signature", "")):
                bad_signatures["bad"] += 1
                arrivals.append([now, "", "", webhook_id, 401])
                return web.Response(status=401, text="bad signature")
        try:
            body = json.loads(raw)
            event, data_id = body.get("event", ""), body.get("data", {}).get("id", "")
        except (ValueError, AttributeError):
            event, data_id = "", ""
        answer = 200
        if (
            state["fail_rate"] > 0
            and failures[webhook_id] < max_failures_per_id
            and rng.random() < state["fail_rate"]
        ):
            failures[webhook_id] += 1
            answer = 500
        arrivals.append([now, event, data_id, webhook_id, answer])
        if answer == 200:
            received_at.setdefault((event, data_id), now)
            if (waiter := waiters.pop((event, data_id), None)) is not None:
                waiter.set()
        return web.Response(status=answer, text="ok" if answer == 200 else "flaky")

    async def get_arrivals(request: web.Request) -> web.Response:
        since = int(request.query.get("since", "0"))
        return web.json_response(
            {"arrivals": arrivals[since:], "total": len(arrivals), "bad": bad_signatures["bad"]}
        )

    async def wait(request: web.Request) -> web.Response:
        key = (request.match_info["event"], request.match_info["data_id"])
        if key not in received_at:
            waiter = waiters.setdefault(key, asyncio.Event())
            try:
                await asyncio.wait_for(waiter.wait(), float(request.query.get("timeout", "30")))
            except TimeoutError:
                return web.json_response({"error": "not received"}, status=504)
        return web.json_response({"at": received_at[key]})

    async def configure(request: web.Request) -> web.Response:
        state.update(await request.json())
        return web.json_response(state)

    async def doc(request: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="image/png")

    app = web.Application()
    app.add_routes(
        [
            web.post("/hook", hook),
            web.get("/arrivals", get_arrivals),
            web.get("/wait/{event}/{data_id}", wait),
            web.post("/config", configure),
            web.get("/files/doc.png", doc),
        ]
    )
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--max-failures-per-id", type=int, default=3)
    parser.add_argument("--secret", default=None)
    args = parser.parse_args()
    app = build_app(
        fail_rate=args.fail_rate, max_failures_per_id=args.max_failures_per_id, secret=args.secret
    )
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()

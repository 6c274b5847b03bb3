"""The asyncio load generator: N closed-loop clients (each sends its next request as soon as the
previous answer arrives) for a fixed time, recording every request's latency and every error
(a transport failure or a status other than the one the scenario expects)."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from bench.recorder import Recorder


class Api:
    """One merchant's credentials over one aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, key: str, secret: str):
        self.session = session
        self.base_url = base_url
        self.headers = {"X-Api-Key": key, "X-Api-Secret": secret}

    async def call(
        self,
        rec: Recorder,
        label: str,
        method: str,
        path: str,
        body: dict | None = None,
        expect: tuple[int, ...] = (200, 201),
    ) -> tuple[int, Any]:
        headers = dict(self.headers)
        if method == "POST":
            headers["Idempotency-Key"] = str(uuid.uuid4())
        start = time.perf_counter()
        try:
            async with self.session.request(
                method, self.base_url + path, json=body, headers=headers
            ) as resp:
                payload = await resp.read()
                status = resp.status
        except (TimeoutError, aiohttp.ClientError) as exc:
            rec.error(label, f"{type(exc).__name__}: {exc}")
            return 0, None
        elapsed = time.perf_counter() - start
        try:
            data = json.loads(payload) if payload else None
        except ValueError:
            data = None
        if status not in expect:
            rec.error(label, f"HTTP {status} {payload[:300]!r}", status)
        else:
            rec.ok(label, elapsed, status)
        return status, data


def new_session(concurrency: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=concurrency * 2, force_close=False)
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=90, connect=10)
    )


async def closed_loop(
    *,
    concurrency: int,
    seconds: float,
    op: Callable[[int], Awaitable[None]],
) -> float:
    """Run `op(client_index)` in a loop on `concurrency` clients for `seconds`; returns the
    elapsed time (from start until the last in-flight operation finished)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + seconds

    async def client(i: int) -> None:
        while loop.time() < deadline:
            await op(i)

    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return loop.time() - start


# --- the API operations the scenarios are made of ---------------------------------------------

PAYIN_QUOTE = {
    "country_code": "SN",
    "operator_code": "SN_ORANGE_MOMO",
    "rail_type": "mobile_money",
    "send_amount": "10000",
    "send_currency": "XOF",
}
PHONE_OK = "+221770001234"
PHONE_DECLINED = "+221770001000"


async def create_payin(
    api: Api, rec: Recorder, *, customer_id: str, phone: str = PHONE_OK, on_post=None
) -> dict | None:
    """POST /quotes/payin then POST /payins with that quote."""
    status, quote = await api.call(
        rec,
        "POST /quotes/payin",
        "POST",
        "/quotes/payin",
        {**PAYIN_QUOTE, "customer_id": customer_id},
    )
    if status != 201:
        return None
    if on_post is not None:
        on_post()
    status, payin = await api.call(
        rec,
        "POST /payins",
        "POST",
        "/payins",
        {"quote_id": quote["id"], "customer_id": customer_id, "source": {"phone": phone}},
    )
    return payin if status == 201 else None


async def await_webhook(
    session: aiohttp.ClientSession, rec: Recorder, receiver_url: str, event: str, data_id: str
) -> None:
    """Block until the local receiver has received `event` for `data_id` (long-poll); a
    webhook that does not arrive within 60 s is an error."""
    try:
        async with session.get(f"{receiver_url}/wait/{event}/{data_id}?timeout=60") as resp:
            await resp.read()
            status = resp.status
    except (TimeoutError, aiohttp.ClientError) as exc:
        rec.error("webhook wait", f"{type(exc).__name__}: {exc}")
        return
    if status != 200:
        rec.error("webhook wait", f"{event} for {data_id} not received within 60 s", status)


async def read_payin(api: Api, rec: Recorder, ids: list[str]) -> None:
    await api.call(rec, "GET /payins/{id}", "GET", f"/payins/{random.choice(ids)}")


async def floor(api: Api, rec: Recorder) -> None:
    await api.call(rec, "POST /bench/floor", "POST", "/bench/floor", {"note": "floor"})

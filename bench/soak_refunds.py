"""The soak's refunds: full and partial refunds of its completed payins (some collected from a
phone ending 998, whose refunds the sandbox declines), races of concurrent refunds asking for
more than remains (one or some win, the rest get 400 refund_exceeds_payin), and a refund of a
failed payin (400 payin_not_refundable) or of a remainder under the operator's minimum (400
amount_below_minimum); then the checks on what the database holds."""

from __future__ import annotations

import asyncio
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from bench import loadgen, recorder

PAYS_IN_ONLY_PHONE = "+221770001998"  # collections complete, disbursements (refunds) declined
RACERS = 3  # concurrent refund requests in a race
# Every seeded operator's min_amount (quotes.catalog): a refund is refused below it, so a
# remainder under it cannot be refunded on its own (400 amount_below_minimum).
OPERATOR_MINIMUM = Decimal(100)


@dataclass
class Refundable:
    payin_id: str
    amount: Decimal
    pays_in_only: bool
    asked: Decimal = Decimal(0)  # what this soak's refunds of it asked for, failed ones too


class Refunds:
    """The refund flows over the payins the soak created."""

    def __init__(self, api: loadgen.Api, rec: recorder.Recorder) -> None:
        self.api = api
        self.rec = rec
        self.pool: deque[Refundable] = deque()  # oldest first: most likely completed
        self.created: dict[str, bool] = {}  # refund id -> its payer only pays in (must fail)
        self.kinds: Counter[str] = Counter()  # full, partial, race, not refundable, ...
        self.races: Counter[str] = Counter()  # requests won and refused
        self.bad: list[str] = []  # answers other than the expected ones

    def add_payin(self, payin: dict, *, pays_in_only: bool) -> None:
        amount = Decimal(payin["send_amount"])
        self.pool.append(Refundable(payin["id"], amount, pays_in_only))

    async def _completed(self) -> Refundable | None:
        """The oldest payin of the pool once completed (a pending one goes back to the end),
        or None; a failed one is asked for a refund it must refuse."""
        if not self.pool:
            return None
        item = self.pool.popleft()
        path = f"/payins/{item.payin_id}"
        status, payin = await self.api.call(self.rec, "GET /payins/{id}", "GET", path)
        if status != 200 or payin["status"] in ("created", "pending"):
            self.pool.append(item)
            return None
        if payin["status"] == "completed":
            return item
        await self._not_refundable(item)
        return None

    async def _not_refundable(self, item: Refundable) -> None:
        self.kinds["not refundable"] += 1
        status, body = await self._post(item, {}, "POST /payins/{id}/refunds (failed payin)", 400)
        if status != 400 or _reason(body) != "payin_not_refundable":
            self.bad.append(f"refund of failed payin {item.payin_id}: {status} {body}")

    async def _post(
        self, item: Refundable, body: dict, label: str, *expect: int
    ) -> tuple[int, dict | None]:
        path = f"/payins/{item.payin_id}/refunds"
        return await self.api.call(self.rec, label, "POST", path, body, expect=expect)

    def _record(self, item: Refundable, refund: dict) -> None:
        self.created[refund["id"]] = item.pays_in_only
        item.asked += Decimal(refund["amount"])

    async def refund(self) -> None:
        """A full refund (no amount) or a partial one of a completed payin; a payin with
        something left to refund goes back to the pool."""
        item = await self._completed()
        if item is None:
            return
        left = item.amount - item.asked
        if left < OPERATOR_MINIMUM:
            await self._below_minimum(item)
            return
        if left > OPERATOR_MINIMUM and random.random() < 0.6:
            self.kinds["partial"] += 1
            amount = random.randint(int(OPERATOR_MINIMUM), int(left) - 1)
            body = {"amount": str(amount), "reason": "soak partial"}
        else:
            self.kinds["full"] += 1
            body = {}
        status, refund = await self._post(item, body, "POST /payins/{id}/refunds", 201)
        if status != 201:
            self.bad.append(f"refund of {item.payin_id} {body}: {status} {refund}")
            return
        self._record(item, refund)
        path = f"/refunds/{refund['id']}"
        await self.api.call(self.rec, "GET /refunds/{id}", "GET", path)
        if random.random() < 0.2:
            query = f"/refunds?payin_id={item.payin_id}"
            await self.api.call(self.rec, "GET /refunds?payin_id", "GET", query)
        if item.asked < item.amount:
            self.pool.append(item)

    async def _below_minimum(self, item: Refundable) -> None:
        """The remainder of a payin under the operator's minimum: refused, and left alone. (A
        payer who only pays in declined the refunds, which freed their amounts: not asked.)"""
        if item.pays_in_only:
            return
        self.kinds["remainder below minimum"] += 1
        status, body = await self._post(item, {}, "POST /payins/{id}/refunds (remainder)", 400)
        if status != 400 or _reason(body) != "amount_below_minimum":
            self.bad.append(f"refund of the remainder of {item.payin_id}: {status} {body}")

    async def over_refund(self) -> None:
        """RACERS concurrent refunds of one completed payin (a payer who takes refunds) that
        together ask for more than is left: as many win as the remainder covers, the others
        get 400 refund_exceeds_payin."""
        item = await self._completed()
        if item is None:
            return
        if item.pays_in_only:  # a declined refund frees its amount: a late racer may win
            self.pool.append(item)
            return
        left = item.amount - item.asked
        if left < OPERATOR_MINIMUM:
            await self._below_minimum(item)
            return
        self.kinds["race"] += 1
        each = left if random.random() < 0.5 else max(OPERATOR_MINIMUM, (left * 4 / 10).quantize(1))
        body = {"amount": str(each), "reason": "soak race"}
        label = "POST /payins/{id}/refunds (race)"
        answers = await asyncio.gather(
            *(self._post(item, body, label, 201, 400) for _ in range(RACERS))
        )
        won = [refund for status, refund in answers if status == 201]
        refused = [b for s, b in answers if s == 400 and _reason(b) == "refund_exceeds_payin"]
        for refund in won:
            self._record(item, refund)
        self.races.update(won=len(won), refused=len(refused))
        expected = min(RACERS, int(left // each))
        if (len(won), len(refused)) != (expected, RACERS - expected):
            statuses = [status for status, _ in answers]
            self.bad.append(f"race on {item.payin_id} ({left} left, {each} each): {statuses}")

    def summary(self) -> dict:
        return {
            "kinds": dict(self.kinds),
            "created": len(self.created),
            "of_pays_in_only_payers": sum(self.created.values()),
            "races": dict(self.races),
            "unexpected": self.bad[:20],
            "unexpected_count": len(self.bad),
        }


def _reason(body: dict | None) -> str | None:
    return ((body or {}).get("error") or {}).get("reason")


def db_checks(q: Callable[[str], list[tuple]]) -> dict:
    """What the database says of every refund: statuses, payins refunded beyond their amount,
    refunds of payins that are not completed, outcomes other than the sandbox's (a payer
    ending 998 declines, any other completes)."""
    by_status = dict(q("SELECT status, count(*) FROM payments_refund GROUP BY status"))
    over = q(
        """
        SELECT count(*) FROM payments_payin p
        WHERE p.send_amount < (SELECT sum(r.amount) FROM payments_refund r
                               WHERE r.payin_id = p.id AND r.status <> 'failed')
        """
    )[0][0]
    not_completed = q(
        """
        SELECT count(*) FROM payments_refund r JOIN payments_payin p ON p.id = r.payin_id
        WHERE p.status <> 'completed'
        """
    )[0][0]
    wrong_outcome = q(
        """
        SELECT count(*) FROM payments_refund
        WHERE status IN ('completed', 'failed')
          AND (status = 'completed') = (right(recipient->>'phone', 3) = '998')
        """
    )[0][0]
    return {
        "by_status": by_status,
        "payins_over_refunded": over,
        "refunds_of_payins_not_completed": not_completed,
        "outcomes_not_the_sandboxs": wrong_outcome,
    }

"""The soak's POST /operators/predict calls: numbers of each catalog network (200 with that
operator), valid numbers the catalog does not cover (400 operator_unknown), garbage (400), and
odd spellings of numbers (200 or 400); never a 5xx."""

from __future__ import annotations

import random
from collections import Counter

from bench import loadgen, recorder

# A number prefix of each catalog network -> the operator predicted (tests/quotes: NUMBERS).
NETWORKS = {
    "+23767000": "CM_MTN_MOMO",
    "+23769000": "CM_ORANGE_MOMO",
    "+22177000": "SN_ORANGE_MOMO",
    "+22176000": "SN_FREE_MOMO",
    "+229019700": "BJ_MTN_MOMO",
    "+229019500": "BJ_MOOV_MOMO",
    "+2289000": "TG_TMONEY_MOMO",
    "+225070700": "CI_ORANGE_MOMO",
    "+225050500": "CI_MTN_MOMO",
    "+225010100": "CI_MOOV_MOMO",
}
# Valid numbers of a country the catalog lacks, or of no mobile network of a covered one.
UNCOVERED = ["+33612345678", "+2348031234567", "+14155550100", "+447911123456", "+221338211234"]
GARBAGE: list[object] = [
    "",
    "hello",
    "+221",
    "+22177000123456789",
    "+0221770001234",
    "x" * 200,
    "+221770001234\x00",
    12345,
    None,
    ["+221770001234"],
    {"phone": "+221770001234"},
]
# Spellings a person might paste: separators, national form, other digits, a long tail.
ODD = [
    "+221 77 000 12 34",
    "221770001234",
    "(+221) 77-000-1234",
    "+٢٢١٧٧٠٠٠١٢٣٤",
    "+221" + "7" * 60,
]


class Predictions:
    def __init__(self, api: loadgen.Api, rec: recorder.Recorder) -> None:
        self.api = api
        self.rec = rec
        self.answers: Counter[str] = Counter()  # "kind status" -> count
        self.bad: list[str] = []

    async def predict(self) -> None:
        kind = random.choices(["valid", "uncovered", "garbage", "odd"], [6, 2, 2, 1])[0]
        expected_operator = None
        if kind == "valid":
            prefix, expected_operator = random.choice(list(NETWORKS.items()))
            phone: object = prefix + f"{random.randrange(10_000):04d}"
        else:
            phone = random.choice({"uncovered": UNCOVERED, "garbage": GARBAGE, "odd": ODD}[kind])
        status, body = await self.api.call(
            self.rec,
            "POST /operators/predict",
            "POST",
            "/operators/predict",
            {"phone": phone},
            expect=(200, 400),
        )
        self.answers[f"{kind} {status}"] += 1
        reason = ((body or {}).get("error") or {}).get("reason") if status == 400 else None
        ok = {
            "valid": status == 200 and (body or {}).get("operator_code") == expected_operator,
            "uncovered": status == 400 and reason == "operator_unknown",
            "garbage": status == 400,
            "odd": status in (200, 400),
        }[kind]
        if not ok:
            self.bad.append(f"{kind} {phone!r}: {status} {str(body)[:200]}")

    def summary(self) -> dict:
        return {
            "answers": dict(sorted(self.answers.items())),
            "unexpected": self.bad[:20],
            "unexpected_count": len(self.bad),
        }

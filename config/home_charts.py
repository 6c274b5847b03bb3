"""The dashboard homes' charts, drawn by the Chart.js django-unfold ships and serves with the
dashboard's own static files (unfold/components/chart): a merchant's payins per day and
payments per operator; for ops, each operator's success rate and answer time. The figures
come from payments.selectors; here they become the chart's data and options (JSON)."""

import json
from datetime import datetime

from payments import selectors as payment_selectors

PRIMARY = "var(--color-primary-600)"
SECONDARY = "var(--color-primary-300)"
GREEN = "#16a34a"
ORANGE = "#ea580c"


def _axis(title: str, **extra) -> dict:
    return {
        "beginAtZero": True,
        "title": {"display": True, "text": title, "color": "#6b7280"},
        "ticks": {"color": "#6b7280"},
        "grid": {"color": "rgba(156, 163, 175, 0.2)"},
        **extra,
    }


def _chart(data: dict, scales: dict, *, empty: bool, **options) -> dict:
    """What the template's chart component takes: data and options as JSON; `empty` when
    there is nothing to draw (the template says so instead)."""
    return {
        "data": json.dumps(data),
        "options": json.dumps(
            {
                "animation": False,
                "responsive": True,
                "maintainAspectRatio": False,
                "plugins": {"legend": {"display": True, "position": "top", "align": "end"}},
                "scales": {"x": {"ticks": {"color": "#6b7280"}, "grid": {"display": False}}}
                | scales,
                **options,
            }
        ),
        "empty": empty,
    }


def merchant_charts(*, merchant_id: object, now: datetime) -> dict:
    days = payment_selectors.payin_days(merchant_id=merchant_id, now=now)
    currencies = sorted({currency for day in days for currency in day.volume})
    volume = [
        {
            "type": "bar",
            "label": f"Volume ({currency})",
            "data": [float(day.volume.get(currency, 0)) for day in days],
            "backgroundColor": PRIMARY if n == 0 else SECONDARY,
            "yAxisID": "volume",
            "order": 2,
        }
        for n, currency in enumerate(currencies)
    ]
    rate = {
        "type": "line",
        "label": "Success rate (%)",
        "data": [day.success_rate for day in days],
        "borderColor": GREEN,
        "backgroundColor": GREEN,
        "spanGaps": True,
        "yAxisID": "rate",
        "order": 1,
    }
    daily = _chart(
        {"labels": [day.day.isoformat()[5:] for day in days], "datasets": [*volume, rate]},
        {
            "volume": _axis("completed volume", position="left"),
            "rate": _axis("success rate %", position="right", max=100, grid={"display": False}),
        },
        empty=not any(day.completed or day.failed for day in days),
    )
    operators = payment_selectors.payments_by_operator(merchant_id=merchant_id, now=now)
    by_operator = _chart(
        {
            "labels": [row["operator_code"] for row in operators],
            "datasets": [
                {
                    "label": "Payins",
                    "data": [r["payins"] for r in operators],
                    "backgroundColor": PRIMARY,
                },
                {
                    "label": "Payouts",
                    "data": [r["payouts"] for r in operators],
                    "backgroundColor": SECONDARY,
                },
            ],
        },
        {"y": _axis("payments", stacked=True, ticks={"precision": 0, "color": "#6b7280"})},
        empty=not operators,
    )
    by_operator_options = json.loads(by_operator["options"])
    by_operator_options["scales"]["x"]["stacked"] = True
    by_operator["options"] = json.dumps(by_operator_options)
    return {"daily": daily, "by_operator": by_operator}


def ops_charts(*, now: datetime) -> dict:
    health = payment_selectors.operator_health(now=now)
    labels = [row.operator_code for row in health]
    success = _chart(
        {
            "labels": labels,
            "datasets": [
                {
                    "label": "Success rate (%)",
                    "data": [row.success_rate for row in health],
                    "backgroundColor": GREEN,
                }
            ],
        },
        {"y": _axis("success rate %", max=100)},
        empty=not health,
    )
    answer = _chart(
        {
            "labels": labels,
            "datasets": [
                {
                    "label": "Mean answer time (s)",
                    "data": [row.answer_seconds for row in health],
                    "backgroundColor": ORANGE,
                }
            ],
        },
        {"y": _axis("seconds")},
        empty=not health,
    )
    return {"success": success, "answer": answer}

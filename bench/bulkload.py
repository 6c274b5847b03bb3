"""Scenario E's bulk loader: N consumed payin quotes, N completed payins (each with its history
row) and N/100 active payin quotes already past expires_at (what `expire_quotes` then has to
sweep), written with PostgreSQL COPY; then the database is vacuumed, analyzed and
checkpointed.

Each row is a copy of a template row the API itself created (a quote and its payin from
scenario A), with new ids and times, so the loader follows the models' columns without
restating them. Talks to the `cowry_bench` database only."""

from __future__ import annotations

import random
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

BATCH = 50_000


def _template(conn: psycopg.Connection, table: str, row_id: str) -> dict[str, Any]:
    cur = conn.execute(f"SELECT * FROM {table} WHERE id = %s", [row_id])  # noqa: S608
    names = [d.name for d in cur.description]
    row = cur.fetchone()
    if row is None:
        raise RuntimeError(f"template row {row_id} not found in {table}")
    return dict(zip(names, row, strict=True))


def _copy(conn: psycopg.Connection, table: str, columns: list[str], rows) -> int:
    n = 0
    cols = ", ".join(columns)
    with conn.cursor().copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([Jsonb(v) if isinstance(v, dict | list) else v for v in row])
            n += 1
    return n


def load(*, dsn: str, template_payin_id: str, rows: int, due_fraction: float = 0.01) -> dict:
    """Returns {"rows", "due_quotes", "seconds", "payin_ids_sample"}."""
    started = time.perf_counter()
    rng = random.Random(7)
    sample: list[str] = []
    with psycopg.connect(dsn) as conn:
        payin_t = _template(conn, "payments_payin", template_payin_id)
        quote_t = _template(conn, "quotes_quote", str(payin_t["quote_id"]))
        now = quote_t["created_at"]
        quote_cols = list(quote_t)
        payin_cols = list(payin_t)
        hist_cols = ["payin_id", "status", "reason", "created_at"]

        done = 0
        while done < rows:
            n = min(BATCH, rows - done)
            quotes, payins, history = [], [], []
            for _ in range(n):
                created = now - timedelta(seconds=rng.uniform(3600, 30 * 86400))
                qid, pid = uuid.uuid4(), uuid.uuid4()
                q = dict(quote_t)
                q.update(
                    id=qid,
                    created_at=created,
                    expires_at=created + timedelta(minutes=15),
                    status="consumed",
                    consumed_at=created + timedelta(seconds=1),
                )
                p = dict(payin_t)
                p.update(
                    id=pid,
                    quote_id=qid,
                    status="completed",
                    provider_reference=f"SIM-BULK-{pid.hex[:12]}",
                    created_at=created + timedelta(seconds=1),
                    updated_at=created + timedelta(seconds=2),
                    submitted_at=created + timedelta(seconds=1),
                    completed_at=created + timedelta(seconds=2),
                    provider_timeout_at=created + timedelta(hours=1),
                    failed_at=None,
                    failure_reason="",
                )
                quotes.append([q[c] for c in quote_cols])
                payins.append([p[c] for c in payin_cols])
                history.append([pid, "completed", "", created + timedelta(seconds=2)])
                if len(sample) < 20_000 and rng.random() < 0.05:
                    sample.append(str(pid))
            with conn.transaction():
                _copy(conn, "quotes_quote", quote_cols, quotes)
                _copy(conn, "payments_payin", payin_cols, payins)
                _copy(conn, "payments_payinhistory", hist_cols, history)
            done += n

        due = int(rows * due_fraction)
        due_rows = []
        for _ in range(due):
            created = now - timedelta(minutes=rng.uniform(16, 120))
            q = dict(quote_t)
            q.update(
                id=uuid.uuid4(),
                created_at=created,
                expires_at=created + timedelta(minutes=15),
                status="active",
                consumed_at=None,
            )
            due_rows.append([q[c] for c in quote_cols])
        with conn.transaction():
            _copy(conn, "quotes_quote", quote_cols, due_rows)
        conn.commit()
        # Vacuumed, analyzed and checkpointed, as a database that has been running would be
        # (autovacuum is off on the bench machine's PostgreSQL): otherwise the dead rows of the
        # scenarios before and a gigabyte of dirty pages land in scenario E's measurement.
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE)")
        conn.execute("CHECKPOINT")
    return {
        "rows": rows,
        "due_quotes": due,
        "seconds": round(time.perf_counter() - started, 1),
        "payin_ids_sample": sample,
    }

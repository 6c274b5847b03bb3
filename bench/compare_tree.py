"""One tree's side of `BENCH_BASELINE=<commit> make bench`: bench/compare.py starts one of these
per tree, each with its own BENCH_DB_NAME, BENCH_REDIS_CACHE_DB, BENCH_REDIS_BROKER_DB and
BENCH_OUT, so the two stacks share no database, Redis DB or logs.

    compare_tree.py <app root> <label>

It starts the stack of the app at <app root> (run_bench.start: a freshly made database, the
seeded merchant, the webhook receiver, web and worker) and answers {"ready": ...}; then it reads
one command a line on stdin and answers one JSON line on stdout:

- D, A, B, C: one measured turn of that scenario, BENCH_SECONDS / BENCH_TURNS long after its
  own warm-up. After A the worker drains what it left; B reads the payins this tree's A turns
  created; after C it waits for that turn's webhooks, then drains. So the stack is idle when it
  answers, while the other tree takes its turn. The answer: that turn's figures, and the CPU
  this stack used while it sat idle since its previous answer.
- results: every scenario's turns summarized as one run (as compare.py prints them), C's end to
  end figures over all its turns, and the idle CPU; then it stops the stack and exits.

The stack is also stopped at the end of stdin, on an error, SIGTERM or SIGINT. Log lines go to
stderr, prefixed with <label>; stdout carries only the answers."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import recorder, run_bench
from bench.stack import Stack, install_signal_handlers, log

KINDS = "DABC"


class Prefixed(io.TextIOBase):
    """A text stream writing to `stream` with `prefix` at the start of every line."""

    def __init__(self, stream, prefix: str) -> None:
        self.stream = stream
        self.prefix = prefix
        self.at_line_start = True

    def write(self, text: str) -> int:
        for line in text.splitlines(keepends=True):
            if self.at_line_start:
                self.stream.write(self.prefix)
            self.stream.write(line)
            self.at_line_start = line.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


class Tree:
    """The stack of one tree and what its turns measured."""

    def __init__(self, app_root: Path) -> None:
        self.loadavg = os.getloadavg()[0]  # other load on the box shows here
        self.stack = Stack(app_root=app_root)
        self.merchant: dict = {}
        self.customer_id = self.receiver_url = ""
        self.parts: dict[str, list[dict]] = {kind: [] for kind in KINDS}
        self.drains: dict[str, list[float]] = {"A": [], "C": []}
        self.latencies: dict[str, float] = {}  # C: payin id -> seconds from POST to webhook
        self.deliveries = 0  # C: webhooks delivered while a turn was measured
        self.idle_seconds = 0.0
        self.idle_cpu: dict[str, float] = {}
        self.answered = (time.monotonic(), {})

    def start(self) -> dict:
        self.merchant, self.customer_id, _receiver, self.receiver_url = run_bench.start(self.stack)
        return self._answered({"ready": str(self.stack.app_root)})

    def turn(self, kind: str) -> dict:
        idle = self._idle()
        ids = None
        if kind == "B":
            ids = [payin_id for part in self.parts["A"] for payin_id in part["created"]]
            if not ids:
                raise RuntimeError("B reads the payins of A: no turn of A yet")
        mark = run_bench.receiver_arrivals(self.receiver_url)["total"] if kind == "C" else 0
        seconds = run_bench.SECONDS / run_bench.TURNS
        part = run_bench._measured(
            self.stack, self.merchant, self.customer_id, kind, ids, self.receiver_url, seconds
        )
        self.parts[kind].append(part)
        figures = recorder.summarize(kind, [part])
        answer = {
            "kind": kind,
            "turn": len(self.parts[kind]),
            **{k: figures[k] for k in ("throughput_rps", "p50_ms", "p99_ms", "errors")},
            "cpu_ms_per_request": figures["cpu_ms_per_request"],
            "idle_before": idle,
        }
        if kind == "C":
            latencies, arrivals = run_bench.webhooks_awaited(
                self.receiver_url, mark, part["posted_at"]
            )
            self.latencies |= latencies
            self.deliveries += run_bench.deliveries_in(arrivals, *part["window"])
            answer["webhooks_missing"] = len(part["posted_at"]) - len(latencies)
        if kind in self.drains:
            self.drains[kind].append(run_bench.drain())
            answer["drain_seconds"] = self.drains[kind][-1]
        return self._answered(answer)

    def results(self) -> dict:
        """What compare.py's tables and ratios read, every scenario's turns as one run."""
        out: dict = {"loadavg_1m_at_start": round(self.loadavg, 2)}
        for kind in KINDS:
            out[kind] = run_bench.strip(recorder.summarize(kind, self.parts[kind]))
        for kind, drains in self.drains.items():
            out[kind]["drain_seconds"] = max(drains)
        posted_at = {k: v for part in self.parts["C"] for k, v in part["posted_at"].items()}
        measured = sum(part["window"][1] - part["window"][0] for part in self.parts["C"])
        out["C"]["e2e"] = run_bench.end_to_end(posted_at, self.latencies, self.deliveries, measured)
        out["idle_between_turns"] = {
            "seconds": round(self.idle_seconds, 1),
            "cpu_seconds": {k: round(v, 2) for k, v in self.idle_cpu.items()},
        }
        return out

    def _idle(self) -> dict:
        """The CPU the stack used since its previous answer, while the other tree ran."""
        at, before = self.answered
        seconds = time.monotonic() - at
        after = self.stack.cpu_ticks()
        tick = os.sysconf("SC_CLK_TCK")
        used = {k: (v - before.get(k, 0)) / tick for k, v in after.items() if k in before}
        self.idle_seconds += seconds
        for k, v in used.items():
            self.idle_cpu[k] = self.idle_cpu.get(k, 0.0) + v
        return {"seconds": round(seconds, 1), "cpu_seconds": round(sum(used.values()), 2)}

    def _answered(self, answer: dict) -> dict:
        self.answered = (time.monotonic(), self.stack.cpu_ticks())
        return answer

    def close(self) -> None:
        log("stopping the stack")
        self.stack.close()
        receiver = self.stack.extra_pids.get("receiver")
        if receiver is not None:  # run_bench.start started it in its own session
            with contextlib.suppress(ProcessLookupError):
                os.killpg(receiver, signal.SIGTERM)


def main() -> int:
    app_root, label = Path(sys.argv[1]), sys.argv[2]
    # The driver's pipes, for commands and answers only: the stack's processes inherit
    # /dev/null as stdin and stderr as stdout.
    commands = os.fdopen(os.dup(0))
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    sys.stdout = Prefixed(sys.stderr, f"{label}: ")
    install_signal_handlers()
    tree = Tree(app_root)
    try:
        answers.write(json.dumps(tree.start()) + "\n")
        for line in commands:
            command = line.strip()
            if command == "results":
                answers.write(json.dumps(tree.results(), default=str) + "\n")
                break
            if command not in KINDS:
                raise ValueError(f"unknown command {command!r}")
            answers.write(json.dumps(tree.turn(command)) + "\n")
        return 0
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # a second one must not
            signal.signal(sig, signal.SIG_IGN)  # interrupt the stopping
        tree.close()


if __name__ == "__main__":
    sys.exit(main())

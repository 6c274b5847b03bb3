# ruff: noqa: S603, S607 - a developer harness: fixed argv (git) it builds itself
"""`BENCH_BASELINE=<commit> make bench`: scenarios D, A, B and C on the baseline's code and on
this tree, the two in turns, and the ratios new/old. The baseline is checked out into a
temporary git worktree and driven by this tree's harness (load generator, receiver, stack), so a
baseline without the current bench code is measured the same way; its app runs from its
worktree with this venv.

Both stacks run at once, each driven by its own bench/compare_tree.py process over stdin and
stdout (JSON lines), on its own database and Redis DBs (this tree: BENCH_DB_NAME, `cowry_bench`,
and Redis 12/13; the baseline: `<BENCH_DB_NAME>_baseline` and Redis 10/11), logs in
var/bench/current and var/bench/baseline. Every scenario runs in BENCH_TURNS (3) turns of
BENCH_SECONDS / BENCH_TURNS (30 / 3) seconds per tree: D and A turn by turn (D, A, D, A, ...),
then B, then C, each turn on one tree and then the other, which goes first alternating every
turn. So the box's drift over the minutes of a run falls on both trees alike, not on whichever
ran at the slow moment. While one tree takes its turn the other's stack is idle: its worker
was drained after its own turn of A or C, and its idle gunicorn and Celery processes cost next
to nothing (each tree reports the CPU its stack used while idle; `idle_between_turns`). Each
scenario's turns are summarized as one run. Both tables and the ratios are printed and written
to var/bench/compare.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import run_bench
from bench.stack import (
    BENCH_DB,
    OUT,
    PY,
    REDIS_BROKER_URL,
    REDIS_CACHE_URL,
    ROOT,
    install_signal_handlers,
    log,
)
from bench.verdicts import ratios


def tree_env(name: str) -> dict[str, str]:
    """The overrides that give a tree's stack its own database, Redis DBs and logs."""
    cache, broker = (int(url.rsplit("/", 1)[1]) for url in (REDIS_CACHE_URL, REDIS_BROKER_URL))
    if name == "baseline":
        if {cache, broker} & {10, 11}:
            raise ValueError("Redis DBs 10 and 11 are the baseline's; use others for this tree")
        db, cache, broker = f"{BENCH_DB}_baseline", 10, 11
    else:
        db = BENCH_DB
    return {
        "BENCH_DB_NAME": db,
        "BENCH_REDIS_CACHE_DB": str(cache),
        "BENCH_REDIS_BROKER_DB": str(broker),
        "BENCH_OUT": str(OUT / name),
    }


class Tree:
    """One tree's bench/compare_tree.py: its stack, asked for one turn at a time."""

    def __init__(self, name: str, label: str, app_root: Path) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [PY, str(ROOT / "bench" / "compare_tree.py"), str(app_root), label],
            cwd=ROOT,
            env={**os.environ, **tree_env(name)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the driver, which stops it
        )
        self.busy = True  # until it answers "ready"

    def ask(self, command: str | None = None) -> dict:
        """Send `command` (None: just the next answer, e.g. "ready") and return its answer."""
        if command is not None:
            self.busy = True
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} tree's process exited ({self.proc.wait()})")
        self.busy = False
        return json.loads(line)

    def close(self) -> None:
        """Let it stop its stack: at the end of its stdin, or at once (SIGTERM) if it is still
        starting or in a turn."""
        if self.proc.poll() is None:
            if self.busy:
                self.proc.terminate()
            else:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            log(f"the {self.name} tree's process did not stop; killing it")
            self.proc.kill()
            self.proc.wait()


def in_turns(trees: dict[str, Tree]) -> dict[str, dict]:
    """D and A turn by turn, then B, then C, each turn on every tree (which goes first
    alternating); every tree's results."""
    names = list(trees)
    seconds = run_bench.SECONDS / run_bench.TURNS
    for kinds in ("DA", "B", "C"):
        for turn in range(run_bench.TURNS):
            order = names if turn % 2 == 0 else names[::-1]
            for kind in kinds:
                for name in order:
                    log(f"{kind}, turn {turn + 1}/{run_bench.TURNS}, {name}: {seconds:g}s")
                    log_turn(trees[name].ask(kind))
    return {name: tree.ask("results") for name, tree in trees.items()}


def log_turn(r: dict) -> None:
    cpu = r["cpu_ms_per_request"]
    idle = r["idle_before"]
    line = (
        f"  {r['throughput_rps']} req/s, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms,"
        f" errors {r['errors']}; CPU ms/request web {cpu.get('web', 0)}, worker"
        f" {cpu.get('worker', 0)}, postgres {cpu.get('postgres (cowry_bench)', 0)}"
    )
    if "webhooks_missing" in r:
        line += f"; {r['webhooks_missing']} webhooks missing"
    if "drain_seconds" in r:
        line += f"; drained in {r['drain_seconds']} s"
    line += f"; idle before it: {idle['cpu_seconds']} s CPU in {idle['seconds']} s"
    log(line)


def table(title: str, results: dict) -> str:
    header = f"{'scenario':<10}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}"
    lines = [f"{title} (load average {results['loadavg_1m_at_start']} at start)", header]
    for key in ("D", "A", "B", "C"):
        r = results[key]
        lines.append(
            f"{key:<10}{r['throughput_rps']:>9}{r['p50_ms']!s:>9}{r['p95_ms']!s:>9}"
            f"{r['p99_ms']!s:>9}{r['errors']:>8}"
        )
    e2e = results["C"]["e2e"]
    lines.append(
        f"C: {results['C'].get('flows_per_s')} payments/s, POST -> webhook p50 {e2e['p50_ms']} ms,"
        f" p99 {e2e['p99_ms']} ms, {e2e['missing']} webhooks missing"
    )
    return "\n".join(lines)


def main() -> int:
    install_signal_handlers()
    baseline = os.environ["BENCH_BASELINE"]
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{baseline}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    trees: dict[str, Tree] = {}
    with tempfile.TemporaryDirectory(prefix="cowry-baseline-") as temporary:
        worktree = Path(temporary) / "tree"
        log(f"baseline {commit[:12]}: a worktree in {worktree}")
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(worktree), commit], cwd=ROOT, check=True
        )
        try:
            # one after the other: a stack's ports are picked free before it binds them
            for name, label, app_root in (
                ("baseline", commit[:12], worktree),
                ("current", f"this tree ({head})", ROOT),
            ):
                trees[name] = Tree(name, label, app_root)
                log(f"{name}: stack up, app from {trees[name].ask()['ready']}")
            results = in_turns(trees)
        finally:
            for tree in trees.values():
                tree.close()
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT)
    old, new = results["baseline"], results["current"]
    for name, r in results.items():
        idle = r["idle_between_turns"]
        log(
            f"{name}'s stack while idle: {sum(idle['cpu_seconds'].values()):.2f} s of CPU in"
            f" {idle['seconds']} s ({idle['cpu_seconds']})"
        )
    found = ratios(old, new)
    print()
    print(table(f"baseline {commit[:12]}", old))
    print()
    print(table(f"this tree (HEAD {head}, with any uncommitted changes)", new))
    print()
    print(f"{'new/old':<16}{'old':>10}{'new':>10}{'ratio':>9}")
    for label, r in found.items():
        mark = {True: "better", False: "worse", None: ""}[r["better"]]
        print(f"{label:<16}{r['old']!s:>10}{r['new']!s:>10}{r['new/old']!s:>9}  {mark}")
    written = OUT / "compare.json"
    meta = {
        "baseline": commit,
        "head": head,
        "seconds": run_bench.SECONDS,
        "turns": run_bench.TURNS,
        "trees": "in turns",
    }
    written.write_text(
        json.dumps({"meta": meta, "old": old, "new": new, "ratios": found}, indent=2, default=str)
    )
    print(f"\nwritten: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

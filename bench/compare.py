# ruff: noqa: S603, S607 - a developer harness: fixed argv (git) it builds itself
"""`BENCH_BASELINE=<commit> make bench`: scenarios D, A (in turns), B and C on the baseline's
code, then on this tree, back to back, and the ratios new/old. The baseline is checked out
into a temporary git worktree and driven by this tree's harness (load generator, receiver,
stack), so a baseline without the current bench code is measured the same way; its app runs
from its worktree with this venv. Both tables and the ratios are printed and written to
var/bench/compare.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import run_bench
from bench.run_bench import drain, in_turns, scenario, scenario_c, start, strip
from bench.stack import OUT, ROOT, Stack, install_signal_handlers, log
from bench.verdicts import ratios


def measure(app_root: Path, out: Path) -> dict:
    """D and A in turns, B over A's payins, C end to end, on the app at `app_root`."""
    stack = Stack(app_root=app_root, out=out)
    receiver = None
    loadavg = os.getloadavg()[0]  # other load on the box shows here
    try:
        merchant, customer_id, receiver, receiver_url = start(stack)
        results = {"loadavg_1m_at_start": round(loadavg, 2)}
        results |= in_turns(stack, merchant, customer_id, "DA")
        results["B"] = scenario(stack, merchant, customer_id, "B", ids=results["A"]["_created"])
        results["C"] = scenario_c(stack, merchant, customer_id, receiver_url)
        results["C"]["drain_seconds"] = drain()
        return {key: strip(v) if isinstance(v, dict) else v for key, v in results.items()}
    finally:
        log("stopping the stack")
        stack.close()
        if receiver is not None and receiver.poll() is None:
            receiver.terminate()
            receiver.wait(timeout=10)


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
    with tempfile.TemporaryDirectory(prefix="cowry-baseline-") as temporary:
        tree = Path(temporary) / "tree"
        log(f"baseline {commit[:12]}: a worktree in {tree}")
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True
        )
        try:
            old = measure(tree, OUT / "baseline")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    new = measure(ROOT, OUT / "current")
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
    meta = {"baseline": commit, "head": head, "seconds": run_bench.SECONDS}
    written.write_text(
        json.dumps({"meta": meta, "old": old, "new": new, "ratios": found}, indent=2, default=str)
    )
    print(f"\nwritten: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

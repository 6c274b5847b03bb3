"""The repository stands alone and its docs say what the code does: no reference to files
outside it, the README short enough to read, and the docs' tables (sandbox, catalog, events,
retries, settings) equal to what the code holds."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Pieces, so that this file does not match itself.
OUTSIDE = [
    re.escape("../" + "shared"),
    re.escape("DESIGN" + ".md"),
    "DESIGN" + r" §",
    r"\b[Ss]pec" + r" §",
    r"\b[Ss]pec" + r"'?s? [0-9]+(\.[0-9]+)*\b",
    re.escape("merchant-payments-" + "api.md"),
]


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = []
    for name in names:
        path = ROOT / name
        if path.suffix in {".png", ".ico", ".gz", ".woff", ".woff2"} or not path.is_file():
            continue
        files.append(path)
    return files


def test_nothing_refers_to_files_outside_the_repository():
    pattern = re.compile("|".join(OUTSIDE))
    found = []
    for path in _tracked_text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert found == []


def test_the_check_finds_an_outside_reference():
    pattern = re.compile("|".join(OUTSIDE))
    for line in (
        "see ../" + "shared/x",
        "(spec" + " 6.2)",
        "DESIGN" + " §5",
        "the spec" + "'s 6.4",
    ):
        assert pattern.search(line), line


def test_every_docs_file_the_repository_names_exists():
    named = set()
    for path in _tracked_text_files():
        if path.suffix in {".py", ".md", ".example", ".html"}:
            named |= set(re.findall(r"\bdocs/([a-z_]+\.md)", path.read_text()))
    named |= set(re.findall(r"\]\(docs/([a-z_]+\.md)", (ROOT / "README.md").read_text()))
    assert named, "no docs/ reference found: the pattern is stale"
    assert sorted(name for name in named if not (DOCS / name).is_file()) == []


def _table(path: Path, heading: str) -> list[list[str]]:
    text = path.read_text()
    section = text[text.index(f"\n{heading}\n") :]
    end = section.find("\n## ", 1)
    section = section[: end if end != -1 else len(section)]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[1:]]


def test_the_sandbox_table_is_the_simulators():
    from payments.provider import FAILED, simulator

    rows = {row[0].strip("`"): row[1] for row in _table(DOCS / "api.md", "## Sandbox")}
    assert set(rows) == {
        simulator.DECLINE_SUFFIX,
        simulator.SILENT_SUFFIX,
        simulator.REFUSES_DISBURSEMENTS_SUFFIX,
        "anything else",
    }
    paid_to = "+221770000" + simulator.REFUSES_DISBURSEMENTS_SUFFIX
    assert simulator.simulated_outcome(paid_to, kind="collection") == ("completed", "")
    assert simulator.simulated_outcome(paid_to, kind="disbursement") == (
        FAILED,
        "provider_declined",
    )
    assert simulator.simulated_outcome(
        "+221770000" + simulator.DECLINE_SUFFIX, kind="collection"
    ) == (
        FAILED,
        "provider_declined",
    )
    assert "`provider_declined`" in rows[simulator.DECLINE_SUFFIX]
    assert (
        simulator.simulated_outcome("+221770000" + simulator.SILENT_SUFFIX, kind="collection")
        is None
    )
    assert "pending" in rows[simulator.SILENT_SUFFIX]


def test_the_catalog_table_is_the_seeded_catalog():
    from quotes import catalog

    documented = {
        row[0]: (row[1], re.findall(r"`([A-Z_]+)`", row[2]))
        for row in _table(DOCS / "api.md", "## Catalog")
    }
    seeded = {
        country: (currency, [f"{country}_{name}_MOMO" for name, _ in operators])
        for country, (currency, operators) in catalog.COVERAGE.items()
    }
    assert documented == seeded


def test_the_webhook_events_and_retries_are_the_codes():
    from webhooks.services.endpoints import EVENT_TYPES

    events = []
    for row in _table(DOCS / "webhooks.md", "## Events"):
        events += re.findall(r"`([a-z.]+)`", row[0])
    assert events == list(EVENT_TYPES)
    retries = [row[1] for row in _table(DOCS / "webhooks.md", "## Acknowledgement and retries")]
    words = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}
    seconds = [int(n) * words[unit] for n, unit in (r.split() for r in retries)]
    default = re.search(
        r'"WEBHOOK_RETRY_SCHEDULE", default=\[([0-9, ]+)\]',
        (ROOT / "config/settings.py").read_text(),
    )
    assert seconds == [int(n) for n in default.group(1).split(",")]


@pytest.mark.parametrize("doc", ["operations.md"])
def test_every_documented_variable_is_read_by_the_settings_or_the_procfile(doc):
    read = set(re.findall(r"\$\{([A-Z_]+)", (ROOT / "Procfile").read_text()))
    for settings_file in ("config/settings.py", "config/settings_production.py"):
        read |= set(
            re.findall(
                r"""env(?:\.\w+)?\(\s*["']([A-Z0-9_]+)["']""", (ROOT / settings_file).read_text()
            )
        )
    documented = set()
    for row in _table(DOCS / doc, "## Environment variables"):
        documented |= set(re.findall(r"`([A-Z0-9_]+)`", row[0]))
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "WEBHOOK_SECRETS_KEYS"} <= documented
    assert sorted(documented - read) == []

"""The README's curl session, from a customer to a completed payin and on through payouts,
refunds, transfers and KYC, replayed command by command against the service (and the reads its
comments send the reader to, "then GET ..."): it must work as written."""

import json
import re
import shlex
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

README = Path(__file__).resolve().parents[1] / "README.md"

# Which placeholder a successful POST's id fills in for the commands after it (by its path as
# the README writes it).
ID_OF = {
    "/customers": "<customer_id>",
    "/quotes/payin": "<quote_id>",
    "/payins": "<payin_id>",
    "/payins/<payin_id>/refunds": "<refund_id>",
    "/quotes/payout": "<payout quote id>",
    "/quotes/transfer": "<transfer quote id>",
    "/transfers": "<transfer_id>",
}


READ_MENTION = re.compile(r"\bGET (/[^\s,;]+)")


def _session_commands() -> list[list[str]]:
    """Each curl command of the session's sh blocks, as words (a body may span lines), and
    each read a comment sends the reader to ("then GET /refunds/<refund_id>") as a curl GET."""
    text = README.read_text()
    section = text[text.index("## Calling the API") : text.index("### Lists, balances, events")]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        chunks: list[list[str]] = []
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("curl "):
                chunks.append([line])
            elif line.startswith("#") or not line.strip():
                chunks.append([])  # a comment line ends the command before it
                chunks += [[f"curl $COWRY{path}"] for path in READ_MENTION.findall(line)]
            elif chunks:
                chunks[-1].append(line)
        commands += [shlex.split("\n".join(c), comments=True) for c in chunks if c]
    return commands


def _request(words: list[str], ids: dict[str, str]) -> tuple[str, str, str, dict, dict | None]:
    """(method, path as written, path with the ids filled in, headers, body)."""
    method, headers, body, path = "GET", {}, None, None
    words = iter(words[1:])
    for word in words:
        if word == "-X":
            method = next(words)
        elif word == "-H":
            name, _, value = next(words).partition(": ")
            headers[name] = value
        elif word == "-d":
            body = next(words)
        elif word.startswith("$COWRY"):
            path = word.removeprefix("$COWRY")
    written = path
    for placeholder, value in ids.items():
        path = path.replace(placeholder, value)
        body = body.replace(placeholder, value) if body else body
    return method, written, path, headers, json.loads(body) if body else None


def test_the_readme_session_works_as_written(
    enabled_api, settings, django_capture_on_commit_callbacks
):
    settings.PROVIDER_SIMULATION_DELAY_SECONDS = 0
    commands = _session_commands()
    assert len(commands) >= 10, "the README's curl session was not found"
    ids: dict[str, str] = {}
    answers = []
    sent, read = {}, {}  # by the path as written: the bodies POSTed, the GETs' answers
    for words in commands:
        method, written, path, headers, body = _request(words, ids)
        assert "<" not in path and "<" not in json.dumps(body), f"unfilled placeholder: {words}"
        with django_capture_on_commit_callbacks(execute=True):
            if method == "POST":
                response = enabled_api.post(
                    path, body, idempotency_key=headers.get("Idempotency-Key")
                )
            else:
                response = enabled_api.get(path)
        answers.append((method, path, response.status_code))
        if path.endswith("/relaunch-payout"):
            # the README's transfer completes, so this is its "409 otherwise"
            assert response.status_code == 409, response.json()
            assert response.json()["error"]["reason"] == "transfer_not_relaunchable"
            continue
        assert 200 <= response.status_code < 300, (method, path, response.json())
        if method == "POST":
            sent[written] = body
        else:
            read[written] = response.json()
        if method == "POST" and written in ID_OF:
            ids[ID_OF[written]] = response.json()["id"]

    assert set(ID_OF.values()) <= set(ids), answers
    payin = enabled_api.get(f"/payins/{ids['<payin_id>']}").json()
    assert payin["status"] == "completed"
    assert [h["status"] for h in payin["history"]] == ["created", "pending", "completed"]
    # the refund step: the reads its comment names show it completed, the payin refunded
    refund_id = ids["<refund_id>"]
    assert read["/refunds/<refund_id>"]["status"] == "completed"
    assert [r["id"] for r in read["/refunds"]["data"]] == [refund_id]
    refunded = sent["/payins/<payin_id>/refunds"]["amount"]
    assert (payin["refunded_amount"], payin["refunds"]) == (refunded, [refund_id])
    transfer = enabled_api.get(f"/transfers/{ids['<transfer_id>']}").json()
    assert transfer["status"] == "completed"

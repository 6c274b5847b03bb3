"""The README's copy-paste webhook check must accept what Cowry really sends, and what the
README says about .env, the components, the ops commands and the events must stay true."""

import re
import sys
import time
from pathlib import Path

import dotenv
import pytest

from webhooks.signing import sign

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_verifier():
    text = README.read_text()
    block = re.search(r"```python\n(.*?def verify_cowry_webhook.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    return namespace["verify_cowry_webhook"]


def test_readme_snippet_accepts_a_real_signature_and_rejects_tampering():
    verify = _readme_verifier()
    body = b'{"id": "e1", "event": "payin.completed"}'
    now = int(time.time())
    headers = {
        "X-Cowry-Timestamp": str(now),
        "X-Cowry-Signature": sign(secret="whsec_test", timestamp=now, body=body),
    }

    assert verify(body, headers, "whsec_test") is True
    assert verify(body + b" ", headers, "whsec_test") is False
    assert verify(body, headers, "whsec_other") is False
    old = {**headers, "X-Cowry-Timestamp": str(now - 301)}
    old["X-Cowry-Signature"] = sign(secret="whsec_test", timestamp=now - 301, body=body)
    assert verify(body, old, "whsec_test") is False


@pytest.mark.parametrize(
    "timestamp,signature",
    [
        ("\u00b2", "sha256=00"),
        ("NOW", "sha256=\u00e9"),
        ("NOW", "sha256=\udcff"),  # a forged 0xff as aiohttp hands it on (surrogateescape)
        ("", ""),
        ("NOW", ""),
        ("9" * 5000, "sha256=00"),  # more digits than int() takes
    ],
)
def test_readme_snippet_says_no_to_forged_headers_without_raising(timestamp, signature):
    timestamp = str(int(time.time())) if timestamp == "NOW" else timestamp
    headers = {"X-Cowry-Timestamp": timestamp, "X-Cowry-Signature": signature}
    assert _readme_verifier()(b"{}", headers, "whsec_test") is False


def test_env_example_lists_every_variable_the_settings_read():
    root = README.parent
    example = (root / ".env.example").read_text()
    read = set()
    for settings_file in ("config/settings.py", "config/settings_production.py"):
        read |= set(
            re.findall(
                r"""env(?:\.\w+)?\(\s*["']([A-Z0-9_]+)["']""", (root / settings_file).read_text()
            )
        )
    assert read, "no env(...) reads found: the pattern is stale"
    assert sorted(name for name in read if f"# {name}=" not in example) == []


def test_env_example_lists_the_procfiles_variables():
    root = README.parent
    example = (root / ".env.example").read_text()
    used = set(re.findall(r"\$\{([A-Z_]+)", (root / "Procfile").read_text()))
    assert {"HOST", "PORT", "WEB_CONCURRENCY", "WORKER_CONCURRENCY"} <= used
    assert sorted(name for name in used if f"# {name}=" not in example) == []


def test_a_dotenv_line_means_what_the_env_example_says(tmp_path):
    """The settings and `make run` (bin/run, bin/run-procfile) read .env with python-dotenv:
    a comment after a blank is dropped, quotes keep what is between them, a `#` with no blank
    before it stays, `export ` is allowed, and the environment wins."""
    import os

    import dotenv

    (tmp_path / ".env").write_text(
        "# PORT=1\n"
        "PORT=18434  # mine\n"
        'HOST="0.0.0.0 # all" # every interface\n'
        "WEB_CONCURRENCY=3#4\t# a tab before this comment\n"
        "export WORKER_CONCURRENCY='5 # five'   \n"
        'SECRET_KEY="local dev #2 abc"\n'
    )
    assert dotenv.dotenv_values(tmp_path / ".env") == {
        "PORT": "18434",
        "HOST": "0.0.0.0 # all",
        "WEB_CONCURRENCY": "3#4",
        "WORKER_CONCURRENCY": "5 # five",
        "SECRET_KEY": "local dev #2 abc",
    }
    name = "COWRY_DOTENV_CHECK"
    (tmp_path / ".env").write_text(f"{name}=from-file\n")
    os.environ[name] = "from-environment"
    try:
        dotenv.load_dotenv(tmp_path / ".env", override=False)
        assert os.environ[name] == "from-environment"
    finally:
        del os.environ[name]


def test_env_example_uncommented_as_it_stands_gives_the_settings_its_values(tmp_path):
    """Every line of .env.example, uncommented with its comment after the value, reaches the
    settings as the value shown (here with WEBHOOK_ALLOW_HTTP switched on, as for a local
    receiver), unless the environment has it; django-environ's reader kept the comment in the
    value."""
    import json
    import os
    import shutil
    import subprocess

    root = README.parent
    example = (root / ".env.example").read_text().split("# Production only")[0]
    lines = [line[2:] for line in example.splitlines() if re.match(r"# [A-Z0-9_]+=", line)]
    names = {line.split("=", 1)[0] for line in lines}
    assert {"WEBHOOK_ALLOW_HTTP", "DATABASE_URL", "LOG_FORMAT"} <= names
    dotenv_text = "\n".join(lines).replace("WEBHOOK_ALLOW_HTTP=false", "WEBHOOK_ALLOW_HTTP=true")
    assert "WEBHOOK_ALLOW_HTTP=true " in dotenv_text  # a comment follows it
    (tmp_path / ".env").write_text(dotenv_text + "\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "__init__.py").write_text("")
    shutil.copy(root / "config" / "settings.py", tmp_path / "config" / "settings.py")
    shutil.copy(root / "config" / "install_secrets.py", tmp_path / "config")
    code = (
        "import json\nfrom config import settings as s\n"
        "print(json.dumps({'allow_http': s.WEBHOOK_ALLOW_HTTP, "
        "'database': s.DATABASES['default']['NAME'], 'broker': s.CELERY_BROKER_URL, "
        "'cache': s.CACHES['default']['BACKEND'], "
        "'log_format': s.LOGGING['handlers']['console']['formatter'], "
        "'hosts': s.ALLOWED_HOSTS, "
        "'media': s.MEDIA_ROOT, 'rate': s.RATE_LIMIT_PER_MINUTE, 'secret': s.SECRET_KEY}))"
    )
    environment = {name: value for name, value in os.environ.items() if name not in names}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**environment, "PYTHONPATH": str(tmp_path), "RATE_LIMIT_PER_MINUTE": "7"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "allow_http": True,
        "database": "cowry",
        "broker": "filesystem://localhost/",
        "cache": "django.core.cache.backends.locmem.LocMemCache",
        "log_format": "json",
        "hosts": ["127.0.0.1", "localhost", "testserver"],
        "media": "var/media",
        "rate": 7,  # the environment wins over the file
        "secret": dotenv.dotenv_values(tmp_path / "var" / "secrets.env")["SECRET_KEY"],
    }


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n{title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _component(name: str) -> str:
    row = re.search(rf"^\| {re.escape(name)} \| (.*) \|$", _section("## What is in the box"), re.M)
    assert row, f"no component row {name!r} in the README"
    return row.group(1)


def test_the_components_are_the_procfiles_processes_and_the_worker_serves_every_queue():
    from django.conf import settings

    procfile = dict(
        line.split(": ", 1)
        for line in (README.parent / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert set(procfile) == {"web", "worker", "beat"}
    assert "gunicorn" in procfile["web"] and _component("web (gunicorn)")
    assert (
        "celery" in procfile["beat"]
        and " beat " in procfile["beat"]
        and _component("beat (Celery)")
    )
    worker_queues = set(re.search(r"-Q (\S+)", procfile["worker"]).group(1).split(","))
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert worker_queues == routed | {settings.CELERY_TASK_DEFAULT_QUEUE}
    readme_queues = _component("worker (Celery)").split("queues ")[1]
    assert set(re.findall(r"`(\w+)`", readme_queues)) == worker_queues


# Each beat entry and what the README's beat row calls it (its interval is checked too).
_TIMEOUTS = "provider timeouts and lost submissions of payments and of transfers"
BEAT_IN_README = {
    "expire-quotes": "expire quotes",
    "deliver-due-webhooks": "due webhook deliveries",
    "fail-timed-out-payments": _TIMEOUTS,
    "fail-timed-out-transfers": _TIMEOUTS,
    "ask-provider-about-overdue-payments": (
        "overdue provider answers of payins and payouts asked of the provider"
    ),
    "resume-stalled-kyc": "stalled KYC fetches and reviews",
    "disable-failing-webhook-endpoints": (
        "disabling endpoints whose deliveries all failed for 5 days"
    ),
    "purge-expired-idempotency-records": "idempotency-key purge",
    "check-ledger": "`check_ledger`",
}


def test_the_readme_names_every_beat_sweep_with_its_interval():
    from django.conf import settings

    interval = {30: "30 s", 60: "1 min", 3600: "1 h", 86400: "daily"}
    row = _component("beat (Celery)")
    assert set(BEAT_IN_README) == set(settings.CELERY_BEAT_SCHEDULE)
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        assert f"{BEAT_IN_README[name]} ({interval[int(entry['schedule'])]})" in row, name


def test_the_ops_table_lists_every_command_with_its_options():
    import argparse

    from django.core.management import get_commands, load_command_class

    apps = {"merchants", "customers", "kyc", "quotes", "payments", "transfers", "webhooks"}
    ours = {name: app for name, app in get_commands().items() if app in apps}
    documented: dict[str, set[str]] = {}
    for line in _section("## Ops commands").splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = re.split(r"(?<!\\)\|", line)[1]
        for usage in re.findall(r"`([^`]+)`", first_cell):
            documented[usage.split()[0]] = set(re.findall(r"--[a-z][a-z-]*", usage))
    assert set(documented) == set(ours)
    for name, app in ours.items():
        parser = argparse.ArgumentParser()
        load_command_class(app, name).add_command_arguments(parser)
        options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
        assert documented[name] == options - {"--help"}, name


def test_the_readme_lists_every_webhook_event():
    from webhooks.services.endpoints import EVENT_TYPES

    paragraph = _section("## Webhooks").split("The events: ")[1].split(". The signature")[0]
    assert re.findall(r"`([a-z.]+)`", paragraph) == list(EVENT_TYPES)


def test_the_readme_receiver_answers_200_to_a_real_delivery_and_401_to_a_forged_one(
    monkeypatch, capsys
):
    import threading
    import urllib.error
    import urllib.request
    from http.server import HTTPServer

    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "the receiver is one file to copy"
    receiver = blocks[0]
    assert "def verify_cowry_webhook" in receiver and "class Receiver" in receiver
    namespace = {"__name__": "readme_receiver"}
    exec(compile(receiver, "README.md", "exec"), namespace)
    monkeypatch.setattr(sys, "argv", ["receiver.py", "whsec_test"])
    server = HTTPServer(("127.0.0.1", 0), namespace["Receiver"])
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def post(signature: str) -> int:
        now = int(time.time())
        body = b'{"id": "e1", "event": "payin.completed"}'
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.server_port}/cowry",
            data=body,
            headers={
                "X-Cowry-Timestamp": str(now),
                "X-Cowry-Signature": signature
                or sign(secret="whsec_test", timestamp=now, body=body),
                "X-Cowry-Event": "payin.completed",
                "X-Cowry-Webhook-Id": "e1",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    try:
        assert post("") == 200
        assert post("sha256=" + "0" * 64) == 401
    finally:
        server.shutdown()
        server.server_close()
    assert "payin.completed e1" in capsys.readouterr().out

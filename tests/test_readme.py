"""The README's copy-paste webhook check must accept what Cowry really sends, and .env must
mean what the README and .env.example say."""

import re
import sys
import time
from pathlib import Path

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


def test_make_run_takes_the_procfiles_variables_from_env_as_the_settings_read_them(tmp_path):
    """bin/run-procfile exports HOST, PORT, WEB_CONCURRENCY and WORKER_CONCURRENCY from .env
    (the environment wins) and nothing else: the settings read the rest themselves."""
    import os
    import subprocess

    script = (README.parent / "bin" / "run-procfile").read_text()
    block = re.search(r"\nif \[\[ -f \.env \]\]; then\n.*?\n  done < \.env\nfi\n", script, re.S)
    (tmp_path / ".env").write_text(
        "PORT=18434  # mine\n"
        'HOST="0.0.0.0" # every interface\n'
        "# WEB_CONCURRENCY=9\n"
        "export WORKER_CONCURRENCY=3\n"
        'SECRET_KEY="local dev #2 abc"\n'
    )
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PORT", "HOST", "WEB_CONCURRENCY", "WORKER_CONCURRENCY", "SECRET_KEY")
    }
    shell = f"set -euo pipefail\ncd {tmp_path}\n{block.group()}\nenv -0\n"
    printed = subprocess.run(
        ["bash", "-c", shell],
        env={**environment, "WORKER_CONCURRENCY": "5"},
        capture_output=True,
        check=True,
    ).stdout.decode()
    exported = dict(item.split("=", 1) for item in printed.split("\0") if "=" in item)
    assert (exported["PORT"], exported["HOST"], exported["WORKER_CONCURRENCY"]) == (
        "18434",
        "0.0.0.0",
        "5",
    )
    assert "WEB_CONCURRENCY" not in exported and "SECRET_KEY" not in exported


def test_the_settings_read_a_dotenv_line_as_make_run_does(tmp_path):
    """One .env, one meaning: config/dotenv.py (the settings) and bin/run-procfile agree on
    comments after a value, quotes, `#` inside a value and `export`."""
    import os
    import subprocess

    from config import dotenv

    lines = {
        "PORT": "PORT=18434  # mine",
        "HOST": 'HOST="0.0.0.0 # all" # every interface',
        "WEB_CONCURRENCY": "WEB_CONCURRENCY=3#4\t# a tab before this comment",
        "WORKER_CONCURRENCY": "export WORKER_CONCURRENCY='5 # five'   ",
    }
    (tmp_path / ".env").write_text("# PORT=1\n" + "\n".join(lines.values()) + "\n")
    script = (README.parent / "bin" / "run-procfile").read_text()
    block = re.search(r"\nif \[\[ -f \.env \]\]; then\n.*?\n  done < \.env\nfi\n", script, re.S)
    environment = {name: value for name, value in os.environ.items() if name not in lines}
    printed = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\ncd {tmp_path}\n{block.group()}\nenv -0\n"],
        env=environment,
        capture_output=True,
        check=True,
    ).stdout.decode()
    exported = dict(item.split("=", 1) for item in printed.split("\0") if "=" in item)

    read = dotenv.parse((tmp_path / ".env").read_text())
    assert read == {name: exported[name] for name in lines}
    assert read == {
        "PORT": "18434",
        "HOST": "0.0.0.0 # all",
        "WEB_CONCURRENCY": "3#4",
        "WORKER_CONCURRENCY": "5 # five",
    }


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
    for module in ("settings.py", "dotenv.py"):
        shutil.copy(root / "config" / module, tmp_path / "config" / module)
    code = (
        "import json\nfrom config import settings as s\n"
        "print(json.dumps({'allow_http': s.WEBHOOK_ALLOW_HTTP, "
        "'database': s.DATABASES['default']['NAME'], 'broker': s.CELERY_BROKER_URL, "
        "'cache': s.CACHES['default']['BACKEND'], "
        "'log_format': s.LOGGING['handlers']['console']['formatter'], "
        "'linger': s.CONSUMER_LINGER_SECONDS, 'hosts': s.ALLOWED_HOSTS, "
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
        "database": "var/cowry.sqlite3",
        "broker": "filesystem://",
        "cache": "django.core.cache.backends.locmem.LocMemCache",
        "log_format": "json",
        "linger": 0.5,
        "hosts": ["127.0.0.1", "localhost", "testserver"],
        "media": "var/media",
        "rate": 7,  # the environment wins over the file
        "secret": "dev-only-insecure-secret-key-change-me-in-production-0123",
    }

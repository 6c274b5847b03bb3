"""No public secrets: each install's development SECRET_KEY and webhook keyring are its own,
generated once under var/ (readable by their owner only) and reused by every later run."""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from config import install_secrets

ROOT = Path(__file__).resolve().parent.parent


def test_two_fresh_installs_get_different_keys_and_a_second_run_reuses_the_first(tmp_path):
    first, second = tmp_path / "one" / "var", tmp_path / "two" / "var"

    made = install_secrets.ensure(first)
    other = install_secrets.ensure(second)

    assert len(made["SECRET_KEY"]) >= 50
    Fernet(made["WEBHOOK_SECRETS_KEYS"])  # a usable key
    assert made["SECRET_KEY"] != other["SECRET_KEY"]
    assert made["WEBHOOK_SECRETS_KEYS"] != other["WEBHOOK_SECRETS_KEYS"]
    assert install_secrets.ensure(first) == made
    path = first / install_secrets.FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in first.iterdir()) == [install_secrets.FILE_NAME]


def test_bin_run_starts_its_processes_with_the_installs_own_secrets(tmp_path):
    """bin/run's first step, on a copy of the repository's code with no var/: the secrets it
    hands the web, worker and beat are the ones it wrote under var/, and again on a rerun."""
    code = (
        "import os, runpy; runpy.run_path('bin/run', run_name='bin_run')['use_install_secrets']();"
        "print(os.environ['SECRET_KEY'], os.environ['WEBHOOK_SECRETS_KEYS'])"
    )
    copy = tmp_path / "clone"
    (copy / "bin").mkdir(parents=True)
    (copy / "bin" / "run").write_text((ROOT / "bin" / "run").read_text())
    for package in ("config", "core"):
        (copy / package).symlink_to(ROOT / package)
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("SECRET_KEY", "WEBHOOK_SECRETS_KEYS")
    }
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=copy,
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for _ in range(2)
    ]
    stored = (copy / "var" / install_secrets.FILE_NAME).read_text()
    assert runs[0] == runs[1]
    assert f"SECRET_KEY={runs[0][0]}\n" in stored
    assert f"WEBHOOK_SECRETS_KEYS={runs[0][1]}\n" in stored


def test_no_settings_module_holds_a_key_of_its_own():
    for name in ("settings.py", "settings_production.py"):
        text = (ROOT / "config" / name).read_text()
        assert "dev-only-insecure" not in text
        # a Fernet key: 32 bytes url-safe base64, 44 characters ending in '='
        assert not re.search(r"[\"'][A-Za-z0-9_-]{43}=[\"']", text), name

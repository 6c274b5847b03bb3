"""The development secrets of one install: SECRET_KEY and the webhook keyring
(WEBHOOK_SECRETS_KEYS), generated once into var/secrets.env, readable by its owner only, and
reused after. `make run` (bin/run) makes them first; config.settings reads them when the
environment gives neither. No settings module holds a key of its own: two installs never share
one, and production takes both from the environment (config.settings_production)."""

import os
import secrets
from pathlib import Path

import dotenv
from cryptography.fernet import Fernet

FILE_NAME = "secrets.env"


def ensure(var_dir: Path) -> dict[str, str]:
    """This install's secrets, generated into var_dir/secrets.env (mode 0600) the first time."""
    path = var_dir / FILE_NAME
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        text = (
            "# Development secrets of this install (config.install_secrets): never commit them.\n"
            f"SECRET_KEY={secrets.token_urlsafe(64)}\n"
            f"WEBHOOK_SECRETS_KEYS={Fernet.generate_key().decode()}\n"
        )
        draft = var_dir / f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(text)
        try:  # whole or not at all; a process that got there first wins
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    values = dotenv.dotenv_values(path)
    return {name: values.get(name) or "" for name in ("SECRET_KEY", "WEBHOOK_SECRETS_KEYS")}

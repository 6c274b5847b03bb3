"""Secrets encrypted at rest: the webhook signing secrets, and a new secret waiting in the
session for the page that shows it once (core.secret_once).

The signer needs each secret back to compute its HMAC, so it cannot be hashed like an API
secret; it is stored as a Fernet token (AES-128-CBC and HMAC-SHA256, from `cryptography`), so a
copy of the database alone does not let anyone forge Cowry webhooks. `WEBHOOK_SECRETS_KEYS` is
a list of Fernet keys: the first encrypts, every one decrypts (MultiFernet). A key is rotated
by putting a new key first, running `reencrypt_webhook_secrets`, then removing the old key.

A token none of the keys opens (a key missing from the setting, a corrupt value) raises
UnreadableSecret: nothing is ever signed with anything but the secret the merchant was given.
"""

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class UnreadableSecret(Exception):
    """A stored signing secret that no key of WEBHOOK_SECRETS_KEYS decrypts."""


@lru_cache(maxsize=8)
def _fernets(keys: tuple[str, ...]) -> tuple[MultiFernet, Fernet]:
    """Every key (decrypts) and the first (encrypts), built once per setting value."""
    if not keys:
        raise ImproperlyConfigured("WEBHOOK_SECRETS_KEYS is empty.")
    try:
        each = [Fernet(key) for key in keys]
    except ValueError:
        raise ImproperlyConfigured(
            "WEBHOOK_SECRETS_KEYS holds a value that is not a Fernet key"
            " (32 url-safe base64-encoded bytes)."
        ) from None
    return MultiFernet(each), each[0]


def _keys() -> tuple[MultiFernet, Fernet]:
    return _fernets(tuple(settings.WEBHOOK_SECRETS_KEYS))


def encrypt(secret: str) -> str:
    """The value to store for `secret`: a Fernet token under the first key."""
    return _keys()[1].encrypt(secret.encode("utf-8")).decode("ascii")


def decrypt(stored: str) -> str:
    """The secret `stored` holds; UnreadableSecret when no key opens it."""
    try:
        return _keys()[0].decrypt(stored.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        raise UnreadableSecret("No key of WEBHOOK_SECRETS_KEYS decrypts this secret.") from None


def under_first_key(stored: str) -> bool:
    """Whether `stored` is already encrypted with the first (current) key."""
    try:
        _keys()[1].decrypt(stored.encode("ascii"))
    except (InvalidToken, UnicodeError):
        return False
    return True


# Every Fernet token starts with these characters (the version byte 0x80, then the high bytes of
# a 64-bit timestamp, zero until 2106), a damaged one too.
FERNET_PREFIX = "gAAAAA"


def in_clear(stored: str) -> bool:
    """Whether `stored` is a secret in clear (written by code older than the encryption), not a
    token (possibly damaged, or under a key no longer listed)."""
    return not stored.startswith(FERNET_PREFIX)


def reencrypt(stored: str) -> str:
    """`stored`, encrypted afresh under the first key; UnreadableSecret when no key opens it."""
    return encrypt(decrypt(stored))

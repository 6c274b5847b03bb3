"""API secrets are 256-bit random tokens, so a single SHA-256 is a sound one-way hash for them
(no dictionary to slow down); comparisons are constant-time."""

import hashlib
import hmac
import secrets

KEY_PREFIX = "ck_"
SECRET_PREFIX = "cs_"


def new_public_key() -> str:
    return KEY_PREFIX + secrets.token_hex(16)


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    # surrogatepass: a header no secret could match still hashes (and fails), not raises
    return hashlib.sha256(secret.encode(errors="surrogatepass")).hexdigest()


def secret_matches(secret: str, secret_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), secret_hash)


# Compared against when the key is unknown, so a miss costs the same as a wrong secret.
UNKNOWN_KEY_HASH = hash_secret(secrets.token_urlsafe(32))

"""Verify a Cowry webhook on the receiving side. Standard library only: copy this file into
your project as is.

    from verify import verify_signature

    ok = verify_signature(payload=request.body, headers=request.headers, secret=SIGNING_SECRET)

`payload` must be the raw request body, before any JSON parsing.
"""

import hashlib
import hmac
import time
from collections.abc import Mapping

SIGNATURE_HEADER = "X-Cowry-Signature"
TIMESTAMP_HEADER = "X-Cowry-Timestamp"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    for key, candidate in headers.items():
        if key.lower() == wanted:
            return candidate
    return None


def verify_signature(
    *,
    payload: bytes,
    headers: Mapping[str, str],
    secret: str,
    tolerance_seconds: int = 300,
    now: int | None = None,
) -> bool:
    """True when X-Cowry-Signature is the HMAC-SHA256 of f"{timestamp}.{payload}" under
    `secret` (compared in constant time) and X-Cowry-Timestamp is within `tolerance_seconds`
    of `now` (default: the current Unix time). False otherwise; it never raises."""
    signature = _header(headers, SIGNATURE_HEADER)
    timestamp_text = _header(headers, TIMESTAMP_HEADER)
    if (
        not signature
        or not signature.isascii()  # a forged byte some servers hand on as a lone surrogate
        or not timestamp_text
        or not (timestamp_text.isascii() and timestamp_text.isdigit())
        or len(timestamp_text) > 12  # a Unix time; int() refuses 4,300 digits and more
    ):
        return False
    timestamp = int(timestamp_text)
    current = int(time.time()) if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        return False
    message = timestamp_text.encode("ascii") + b"." + payload
    expected = "sha256=" + hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("ascii"))

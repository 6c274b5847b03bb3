"""A webhook's signature: "sha256=" + hex HMAC-SHA256(secret, f"{timestamp}.{raw_body}")."""

import hashlib
import hmac

SIGNATURE_HEADER = "X-Cowry-Signature"
TIMESTAMP_HEADER = "X-Cowry-Timestamp"
EVENT_HEADER = "X-Cowry-Event"
WEBHOOK_ID_HEADER = "X-Cowry-Webhook-Id"


def sign(*, secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode("ascii") + b"." + body
    return "sha256=" + hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()

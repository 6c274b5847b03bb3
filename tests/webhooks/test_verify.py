import hashlib
import hmac

from webhooks.verify import verify_signature

SECRET = "whsec_test_secret_value"
BODY = b'{"id":"e1","event":"payin.completed"}'
NOW = 1_800_000_000


def _headers(timestamp: int = NOW, body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    message = str(timestamp).encode() + b"." + body
    signature = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return {"X-Cowry-Signature": f"sha256={signature}", "X-Cowry-Timestamp": str(timestamp)}


def test_a_valid_signature_is_accepted():
    assert verify_signature(payload=BODY, headers=_headers(), secret=SECRET, now=NOW)


def test_header_names_are_case_insensitive():
    headers = {k.lower(): v for k, v in _headers().items()}
    assert verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)


def test_a_changed_body_is_rejected():
    assert not verify_signature(payload=BODY + b" ", headers=_headers(), secret=SECRET, now=NOW)


def test_a_wrong_secret_is_rejected():
    assert not verify_signature(payload=BODY, headers=_headers(), secret="other", now=NOW)


def test_a_timestamp_older_than_five_minutes_is_rejected():
    headers = _headers(timestamp=NOW - 301)
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)
    headers = _headers(timestamp=NOW - 300)
    assert verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)


def test_a_timestamp_far_in_the_future_is_rejected():
    headers = _headers(timestamp=NOW + 301)
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)


def test_a_replayed_signature_with_another_timestamp_is_rejected():
    headers = _headers()
    headers["X-Cowry-Timestamp"] = str(NOW + 1)
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)


def test_missing_or_malformed_headers_are_rejected():
    assert not verify_signature(payload=BODY, headers={}, secret=SECRET, now=NOW)
    headers = _headers()
    headers["X-Cowry-Timestamp"] = "12a"
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)
    headers = _headers()
    headers["X-Cowry-Timestamp"] = "١٢٣"  # non-ASCII digits
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)
    headers = _headers()
    headers["X-Cowry-Timestamp"] = "9" * 5000  # more digits than int() takes: it raised
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)
    headers = _headers()
    headers["X-Cowry-Signature"] = headers["X-Cowry-Signature"].removeprefix("sha256=")
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)


def test_a_signature_header_that_is_not_ascii_is_rejected_without_raising():
    """aiohttp hands a header's bytes on decoded with surrogateescape: a forged 0xff became a
    lone surrogate, and encoding it for the comparison raised (a 500 on the receiver's side)."""
    for forged in ("sha256=\udcff", "sha256=é" + "0" * 63, "sha256=\ud800"):
        headers = {**_headers(), "X-Cowry-Signature": forged}
        assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)
    headers = {**_headers(), "X-Cowry-Timestamp": str(NOW) + "\udcff"}
    assert not verify_signature(payload=BODY, headers=headers, secret=SECRET, now=NOW)

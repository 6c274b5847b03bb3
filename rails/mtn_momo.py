"""The MTN MoMo Open API on the wire (Collection and Disbursement): tokens, submissions, status
reads, the account balance and the account-holder check. It knows no leg: the payments gateway
(payments.provider.mtn_momo) turns what it says into receipts and answers.

Outbound calls go through core.netguard (a loopback or private base URL, such as the contract
fake's, needs ALLOW_PRIVATE_NETWORK_URLS). Nothing secret is ever put in an exception or a log
line: messages carry the step, the HTTP status and MTN's code only."""

import threading
import time
from typing import Any

import requests
from django.core.cache import cache

from core import netguard
from rails.selectors import ConnectionSettings
from rails.services import token_cache_key

COLLECTION = "collection"
DISBURSEMENT = "disbursement"
SUBMIT_PATHS = {
    COLLECTION: "collection/v1_0/requesttopay",
    DISBURSEMENT: "disbursement/v1_0/transfer",
}
# A token is reused (across processes, through the cache) until this long before it expires.
TOKEN_MARGIN_SECONDS = 60
# One call's whole budget: connect, send and read the answer.
CALL_TIMEOUT_SECONDS = 10
ALREADY_EXISTS = "RESOURCE_ALREADY_EXIST"


class MtnUnavailable(Exception):
    """An outage as far as a leg is concerned: 5xx, 429, no connection, a timeout, or credentials
    MTN refuses (the leg waits and is retried on the same reference)."""

    def __init__(self, step: str, why: str) -> None:
        self.step = step
        self.why = why
        super().__init__(f"{step}: {why}")


class MtnRefused(Exception):
    """MTN refused the request itself (a 4xx other than 401 and 409): `code` is MTN's."""

    def __init__(self, step: str, http_status: int, code: str) -> None:
        self.step = step
        self.http_status = http_status
        self.code = code
        super().__init__(f"{step}: HTTP {http_status} {code}")


_local = threading.local()


def _session() -> requests.Session:
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = netguard.guarded_session()
    return session


def _code(response: requests.Response) -> str:
    """MTN's error code in a 4xx body ({"code": ..., "message": ...}), or the HTTP status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        return body["code"][:64]
    return f"HTTP_{response.status_code}"


def token_age_seconds(name: str, product: str, *, now: float) -> float | None:
    """How old the connection's cached token of `product` is (None: no token cached)."""
    cached = cache.get(token_cache_key(name, product))
    return None if not cached else max(now - cached["fetched_at"], 0.0)


class MtnClient:
    def __init__(self, connection: ConnectionSettings) -> None:
        self.connection = connection

    def _send(self, step: str, method: str, path: str, **kwargs: Any) -> requests.Response:
        url = f"{self.connection.base_url}/{path}"
        try:
            with netguard.deadline(CALL_TIMEOUT_SECONDS):
                response = _session().request(
                    method, url, timeout=CALL_TIMEOUT_SECONDS, allow_redirects=False, **kwargs
                )
        except requests.RequestException as exc:
            raise MtnUnavailable(step, f"no answer ({type(exc).__name__})") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise MtnUnavailable(step, f"HTTP {response.status_code} {_code(response)}")
        return response

    def token(self, product: str, *, fresh: bool = False) -> str:
        """A bearer token of `product`: the cached one unless `fresh`."""
        key = token_cache_key(self.connection.name, product)
        if not fresh:
            cached = cache.get(key)
            if cached:
                return cached["token"]
        credentials = self.connection.credentials[product]
        response = self._send(
            f"{product} token",
            "POST",
            f"{product}/token/",
            auth=(credentials["api_user"], credentials["api_key"]),
            headers={"Ocp-Apim-Subscription-Key": credentials["subscription_key"]},
        )
        if response.status_code != 200:
            raise MtnUnavailable(
                f"{product} token",
                f"credentials refused (HTTP {response.status_code} {_code(response)})",
            )
        try:
            body = response.json()
            token, expires_in = str(body["access_token"]), int(body["expires_in"])
        except (ValueError, KeyError, TypeError):
            raise MtnUnavailable(f"{product} token", "unreadable token answer") from None
        cache.set(
            key,
            {"token": token, "fetched_at": time.time()},
            timeout=max(expires_in - TOKEN_MARGIN_SECONDS, 1),
        )
        return token

    def _call(self, step: str, product: str, method: str, path: str, **kwargs: Any):
        """A product call with its bearer token, fetched again once after a 401."""
        headers = {
            "X-Target-Environment": self.connection.target_environment,
            "Ocp-Apim-Subscription-Key": self.connection.credentials[product]["subscription_key"],
            **kwargs.pop("headers", {}),
        }
        for fresh in (False, True):
            token = self.token(product, fresh=fresh)
            response = self._send(
                step,
                method,
                path,
                headers={**headers, "Authorization": f"Bearer {token}"},
                **kwargs,
            )
            if response.status_code != 401:
                return response
        raise MtnUnavailable(step, "token refused (HTTP 401)")

    def submit(
        self, product: str, *, reference_id: str, callback_url: str, body: dict[str, Any]
    ) -> bool:
        """Send a requesttopay (collection) or a transfer (disbursement): True when accepted now,
        False when MTN had it already (409 RESOURCE_ALREADY_EXIST: its status decides)."""
        response = self._call(
            f"{product} submit",
            product,
            "POST",
            SUBMIT_PATHS[product],
            headers={"X-Reference-Id": reference_id, "X-Callback-Url": callback_url},
            json=body,
        )
        if response.status_code in (200, 201, 202):
            return True
        if response.status_code == 409 and _code(response) == ALREADY_EXISTS:
            return False
        raise MtnRefused(f"{product} submit", response.status_code, _code(response))

    def status(self, product: str, reference_id: str) -> dict[str, Any] | None:
        """What MTN says of request `reference_id` (None: it never received it)."""
        response = self._call(
            f"{product} status", product, "GET", f"{SUBMIT_PATHS[product]}/{reference_id}"
        )
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise MtnRefused(f"{product} status", response.status_code, _code(response))
        try:
            body = response.json()
        except ValueError:
            raise MtnUnavailable(f"{product} status", "unreadable status answer") from None
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise MtnUnavailable(f"{product} status", "unreadable status answer")
        return body

    def balance(self, product: str = DISBURSEMENT) -> dict[str, Any]:
        response = self._call(
            f"{product} balance", product, "GET", f"{product}/v1_0/account/balance"
        )
        if response.status_code != 200:
            raise MtnRefused(f"{product} balance", response.status_code, _code(response))
        return response.json()

    def account_holder_active(self, product: str, msisdn: str) -> bool:
        response = self._call(
            f"{product} account holder",
            product,
            "GET",
            f"{product}/v1_0/accountholder/msisdn/{msisdn}/active",
        )
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            raise MtnRefused(f"{product} account holder", response.status_code, _code(response))
        return bool(response.json().get("result"))


def failure_code(body: dict[str, Any]) -> str:
    """MTN's raw reason of a FAILED status: a string, or {"code": ...} in older answers."""
    reason = body.get("reason")
    if isinstance(reason, dict):
        reason = reason.get("code")
    return str(reason)[:64] if reason else ""

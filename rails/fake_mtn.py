"""A contract fake of the MTN MoMo Open API (Collection and Disbursement), for the tests and for
running Cowry against by hand (`python manage.py run_fake_mtn`, or `python -m rails.fake_mtn`).

It serves what Cowry uses, as MTN publishes it: the token endpoints (HTTP Basic api_user:api_key
and the product's Ocp-Apim-Subscription-Key; tokens expire), requesttopay and transfer (bearer
token, X-Reference-Id a UUID, X-Target-Environment, X-Callback-Url; 202, or 409
RESOURCE_ALREADY_EXIST on a reused reference), their status reads, the account balance and the
account-holder check, and callbacks by POST (collections) or PUT (disbursements) to the
X-Callback-Url. Fault switches (`FakeMtn.switches`, or `POST /_fake/switches` with a JSON
object) make it lose callbacks, answer 5xx, answer slowly, leave requests pending, expire every
token, or decline by MSISDN (or every request) with an MTN reason code. Nothing here is Cowry's:
it imports no app."""

import argparse
import base64
import contextlib
import json
import secrets
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PRODUCTS = ("collection", "disbursement")
SUBMIT = {"collection": "requesttopay", "disbursement": "transfer"}


def default_credentials() -> dict[str, dict[str, str]]:
    return {
        product: {
            "subscription_key": f"fake-{product}-subscription-key",
            "api_user": str(uuid.uuid5(uuid.NAMESPACE_URL, f"fake-mtn-{product}")),
            "api_key": f"fake-{product}-api-key",
        }
        for product in PRODUCTS
    }


@dataclass
class Switches:
    lose_callbacks: bool = False  # decide, but never call back
    fail_requests: int = 0  # the next N product requests answer 503
    down: bool = False  # every request answers 503
    slow_seconds: float = 0.0  # every answer waits this long
    pending: bool = False  # requests stay PENDING (until the switch is off and one is read)
    decline_all: str = ""  # every request FAILED with this reason
    declines: dict[str, str] = field(default_factory=dict)  # MSISDN -> reason of its FAILED
    refuse: dict[str, str] = field(default_factory=dict)  # MSISDN -> code of a 400 at submit
    inactive: set[str] = field(default_factory=set)  # account holders not active
    callback_delay_seconds: float = 0.0


class FakeMtn:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        target_environment: str = "sandbox",
        credentials: dict | None = None,
        token_ttl_seconds: int = 3600,
    ) -> None:
        self.credentials = credentials or default_credentials()
        self.target_environment = target_environment
        self.token_ttl_seconds = token_ttl_seconds
        self.switches = Switches()
        self.lock = threading.Lock()
        self.tokens: dict[str, tuple[str, float]] = {}  # token -> (product, expires at)
        self.transactions: dict[tuple[str, str], dict[str, Any]] = {}
        self.token_fetches = dict.fromkeys(PRODUCTS, 0)
        self.submissions: list[tuple[str, str, int]] = []  # (product, reference, HTTP status)
        self.status_reads: list[tuple[str, str]] = []
        self.callbacks: list[tuple[str, str, int]] = []  # (method, url, status)
        # every request: (method, path, X-Reference-Id, HTTP status)
        self.requests: list[tuple[str, str, str, int]] = []
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeMtn":
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def expire_tokens(self) -> None:
        with self.lock:
            self.tokens.clear()

    # --- what the handler does -------------------------------------------------------------

    def token(self, product: str, headers) -> tuple[int, dict]:
        expected = self.credentials[product]
        basic = (
            "Basic "
            + base64.b64encode(f"{expected['api_user']}:{expected['api_key']}".encode()).decode()
        )
        if headers.get("Ocp-Apim-Subscription-Key") != expected["subscription_key"]:
            return 401, {
                "statusCode": 401,
                "message": "Access denied due to invalid subscription key.",
            }
        if headers.get("Authorization") != basic:
            return 401, {"error": "login_failed"}
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[token] = (product, time.time() + self.token_ttl_seconds)
            self.token_fetches[product] += 1
        return 200, {
            "access_token": token,
            "token_type": "access_token",
            "expires_in": self.token_ttl_seconds,
        }

    def authorized(self, product: str, headers) -> tuple[int, dict] | None:
        """The refusal of a product call whose headers are wrong, or None."""
        if (
            headers.get("Ocp-Apim-Subscription-Key")
            != self.credentials[product]["subscription_key"]
        ):
            return 401, {
                "statusCode": 401,
                "message": "Access denied due to invalid subscription key.",
            }
        token = (headers.get("Authorization") or "").removeprefix("Bearer ")
        with self.lock:
            product_of, expires_at = self.tokens.get(token, ("", 0.0))
        if product_of != product or expires_at < time.time():
            return 401, {"statusCode": 401, "message": "Access denied due to invalid token."}
        if headers.get("X-Target-Environment") != self.target_environment:
            return 400, {"code": "NOT_ALLOWED_TARGET_ENVIRONMENT", "message": "Wrong environment."}
        return None

    def submit(self, product: str, headers, body: Any) -> tuple[int, dict]:
        reference = headers.get("X-Reference-Id") or ""
        status, answer = self._submit(product, reference, headers, body)
        with self.lock:
            self.submissions.append((product, reference, status))
        return status, answer

    def _submit(self, product: str, reference: str, headers, body: Any) -> tuple[int, dict]:
        try:
            uuid.UUID(reference)
        except ValueError:
            return 400, {"code": "INVALID_REFERENCE_ID", "message": "X-Reference-Id is no UUID."}
        party_field = "payer" if product == "collection" else "payee"
        try:
            party = body[party_field]["partyId"]
            assert body[party_field]["partyIdType"] == "MSISDN" and party.isdigit()
            assert body["amount"].isdigit() and isinstance(body["currency"], str)
        except (KeyError, TypeError, AssertionError, AttributeError):
            return 400, {"code": "BAD_REQUEST", "message": "Invalid body."}
        if self.target_environment == "sandbox" and body["currency"] != "EUR":
            return 400, {"code": "INVALID_CURRENCY", "message": "Currency not supported."}
        if party in self.switches.refuse:
            return 400, {"code": self.switches.refuse[party], "message": "Refused."}
        with self.lock:
            if (product, reference) in self.transactions:
                return 409, {
                    "code": "RESOURCE_ALREADY_EXIST",
                    "message": "Duplicated reference id.",
                }
            self.transactions[(product, reference)] = {
                "amount": body["amount"],
                "currency": body["currency"],
                "externalId": body.get("externalId", ""),
                party_field: body[party_field],
                "payerMessage": body.get("payerMessage", ""),
                "payeeNote": body.get("payeeNote", ""),
                "status": "PENDING",
            }
        if not self.switches.pending:
            self.decide(product, reference, party)
        callback_url = headers.get("X-Callback-Url")
        if callback_url and not self.switches.lose_callbacks and not self.switches.pending:
            method = "POST" if product == "collection" else "PUT"
            threading.Thread(
                target=self.call_back,
                args=(method, callback_url, (product, reference)),
                daemon=True,
            ).start()
        return 202, {}

    def decide(self, product: str, reference: str, party: str) -> None:
        reason = self.switches.declines.get(party) or self.switches.decline_all
        with self.lock:
            transaction = self.transactions[(product, reference)]
            if reason:
                transaction.update(status="FAILED", reason=reason)
            else:
                transaction.update(
                    status="SUCCESSFUL", financialTransactionId=str(secrets.randbelow(10**10))
                )

    def call_back(self, method: str, url: str, key: tuple[str, str]) -> None:
        time.sleep(self.switches.callback_delay_seconds)
        with self.lock:  # the decided transaction, as MTN sends it
            body = dict(self.transactions[key])
        if not url.startswith(("http://", "https://")):
            return
        request = urllib.request.Request(  # noqa: S310 (http(s) only, checked above)
            url,
            data=json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                status = response.status
        except Exception as exc:  # a callback that fails is a lost callback, as at MTN
            status = getattr(exc, "code", 0)
        with self.lock:
            self.callbacks.append((method, url, status))

    def status(self, product: str, reference: str) -> tuple[int, dict]:
        with self.lock:
            self.status_reads.append((product, reference))
            transaction = self.transactions.get((product, reference))
        if transaction is None:
            return 404, {"code": "RESOURCE_NOT_FOUND", "message": "Requested resource not found."}
        if transaction["status"] == "PENDING" and not self.switches.pending:
            party_field = "payer" if product == "collection" else "payee"
            self.decide(product, reference, transaction[party_field]["partyId"])
        with self.lock:
            return 200, dict(transaction)


def _handler(fake: FakeMtn) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"fake": fake})


class _Handler(BaseHTTPRequestHandler):
    fake: FakeMtn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode() if body else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _route(self, method: str) -> tuple[int, dict]:
        body = self._body() if method in ("POST", "PUT") else None
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["_fake", "switches"] and method == "POST":
            for name, value in (body or {}).items():
                setattr(self.fake.switches, name, set(value) if name == "inactive" else value)
            return 200, {"ok": True}
        time.sleep(self.fake.switches.slow_seconds)
        if self.fake.switches.down:
            return 503, {"code": "SERVICE_UNAVAILABLE", "message": "Down."}
        if not parts or parts[0] not in PRODUCTS:
            return 404, {"code": "RESOURCE_NOT_FOUND", "message": "No such path."}
        product = parts[0]
        if parts[1:] == ["token"] and method == "POST":
            return self.fake.token(product, self.headers)
        if parts[1:2] != ["v1_0"]:
            return 404, {"code": "RESOURCE_NOT_FOUND", "message": "No such path."}
        if self.fake.switches.fail_requests > 0:
            self.fake.switches.fail_requests -= 1
            return 500, {"code": "INTERNAL_PROCESSING_ERROR", "message": "Failed."}
        refused = self.fake.authorized(product, self.headers)
        if refused:
            return refused
        rest = parts[2:]
        if rest == [SUBMIT[product]] and method == "POST":
            return self.fake.submit(product, self.headers, body)
        if len(rest) == 2 and rest[0] == SUBMIT[product] and method == "GET":
            return self.fake.status(product, rest[1])
        if rest == ["account", "balance"] and method == "GET":
            return 200, {"availableBalance": "1000000", "currency": "EUR"}
        if len(rest) == 4 and rest[:2] == ["accountholder", "msisdn"] and method == "GET":
            return 200, {"result": rest[2] not in self.fake.switches.inactive}
        return 404, {"code": "RESOURCE_NOT_FOUND", "message": "No such path."}

    def _serve(self, method: str) -> None:
        status, body = self._route(method)
        with self.fake.lock:
            self.fake.requests.append(
                (method, self.path, self.headers.get("X-Reference-Id") or "", status)
            )
        self._answer(status, body)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--target-environment", default="sandbox")
    options = parser.parse_args(argv)
    fake = FakeMtn(
        host=options.host, port=options.port, target_environment=options.target_environment
    )
    print(f"Fake MTN MoMo API on {fake.url} (target environment {fake.target_environment})")
    print("Credentials for `provider_connection add` (standard input):")
    print(json.dumps(fake.credentials))
    with contextlib.suppress(KeyboardInterrupt):
        fake.server.serve_forever()


if __name__ == "__main__":
    main()

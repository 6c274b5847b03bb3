"""The MTN MoMo Open API as a provider gateway: collections are `requesttopay`s, disbursements
(payouts, refunds, transfer disbursements) are `transfer`s, on the wire of rails.mtn_momo.

A leg's X-Reference-Id is its own UUID (a reference that is not one, a transfer's disbursement
attempt, is mapped to a fixed UUID of it), the same on every retry. Its callback URL names the
connection, the connection's secret, the leg and our reference; the callback is only a hint
that the status is worth reading (payments.tasks.provider_callback_check). MTN's failure codes
become Cowry failure reasons by FAILURE_REASONS (docs/mtn-momo.md); the raw code is kept for
support (rails.models.ProviderAnswer)."""

import uuid
from decimal import Decimal
from urllib.parse import quote, urlencode

from django.utils import timezone

from payments.provider import (
    COMPLETED,
    FAILED,
    ProviderReceipt,
    ProviderRejected,
    ProviderUnavailable,
    callback_leg_name,
)
from payments.provider.callbacks import SECRET_PARAMETER
from rails import services as rails_services
from rails.mtn_momo import MtnClient, MtnRefused, MtnUnavailable, failure_code
from rails.selectors import ConnectionSettings

_NAMESPACE = uuid.UUID("3b0c6f7e-2a51-4d8e-9c1f-6a9e4b2d7c10")
# MTN's sandbox takes only euros.
SANDBOX = "sandbox"
SANDBOX_CURRENCY = "EUR"
DEFAULT_REASON = "provider_declined"
FAILURE_REASONS = {
    "PAYER_NOT_FOUND": "account_not_found",
    "PAYEE_NOT_FOUND": "account_not_found",
    "NOT_ENOUGH_FUNDS": "insufficient_funds",
    "PAYER_LIMIT_REACHED": "limit_exceeded",
    "PAYEE_NOT_ALLOWED_TO_RECEIVE": "recipient_not_allowed",
    "NOT_ALLOWED": "not_allowed",
    "APPROVAL_REJECTED": "payer_declined",
    "PAYMENT_NOT_APPROVED": "payer_declined",
    "EXPIRED": "payer_did_not_approve",
    "TRANSACTION_CANCELED": "cancelled",
    "INVALID_CURRENCY": "currency_not_supported",
    "COULD_NOT_PERFORM_TRANSACTION": "provider_declined",
    "INTERNAL_PROCESSING_ERROR": "provider_declined",
}
# Refusals that are our configuration's fault, not the party's: the leg waits, as in an
# outage, while ops fix the connection (an ERROR line a minute), rather than fail in a burst.
CONFIGURATION_CODES = {"NOT_ALLOWED_TARGET_ENVIRONMENT", "INVALID_CALLBACK_URL_HOST", "HTTP_403"}


def failure_reason(code: str) -> str:
    return FAILURE_REASONS.get(code, DEFAULT_REASON)


def reference_id(reference: str) -> str:
    """The X-Reference-Id of our `reference`: itself when it is a UUID, else a fixed one."""
    try:
        return str(uuid.UUID(reference))
    except ValueError:
        return str(uuid.uuid5(_NAMESPACE, reference))


class MtnMomoGateway:
    def __init__(self, connection: ConnectionSettings) -> None:
        self.connection = connection
        self.client = MtnClient(connection)

    def submit_collection(self, **kwargs) -> ProviderReceipt:
        return self._submit(product="collection", party_field="payer", **kwargs)

    def submit_disbursement(self, **kwargs) -> ProviderReceipt:
        return self._submit(product="disbursement", party_field="payee", **kwargs)

    def _body(
        self, *, reference: str, amount: Decimal, currency: str, phone: str, party_field: str
    ):
        sandbox = self.connection.target_environment == SANDBOX
        payment_id = reference.partition(":")[0]
        return {
            "amount": format(amount.quantize(Decimal(1)), "f"),
            "currency": SANDBOX_CURRENCY if sandbox else currency,
            "externalId": payment_id,
            party_field: {"partyIdType": "MSISDN", "partyId": "".join(filter(str.isdigit, phone))},
            "payerMessage": f"Cowry {payment_id}",
            "payeeNote": f"Cowry {payment_id}",
        }

    def callback_url(self, *, leg: str, reference: str) -> str:
        base, name = self.connection.callback_base, self.connection.name
        secret = urlencode({SECRET_PARAMETER: self.connection.callback_secret})
        return f"{base}/provider-callbacks/{name}/{leg}/{quote(reference, safe=':')}?{secret}"

    def _submit(
        self,
        *,
        product: str,
        party_field: str,
        reference: str,
        amount: Decimal,
        currency: str,
        operator_code: str,
        phone: str = "",
        account_number: str = "",
        callback: str,
    ) -> ProviderReceipt:
        if not phone:
            raise ProviderRejected("party_not_supported", "MTN MoMo pays phones only.")
        body = self._body(
            reference=reference,
            amount=amount,
            currency=currency,
            phone=phone,
            party_field=party_field,
        )
        callback_url = self.callback_url(leg=callback_leg_name(callback), reference=reference)
        try:
            fresh = self.client.submit(
                product, reference_id=reference_id(reference), callback_url=callback_url, body=body
            )
        except MtnUnavailable as down:
            raise self._outage(down.step, down.why) from None
        except MtnRefused as refused:
            if refused.code in CONFIGURATION_CODES:
                raise self._outage(refused.step, f"refused: {refused.code}") from None
            self._answer_keep(product, reference, status="REJECTED", raw_code=refused.code)
            raise ProviderRejected(failure_reason(refused.code), f"MTN: {refused.code}") from None
        self._succeeded()
        if fresh:
            return ProviderReceipt(provider_reference=reference_id(reference))
        # 409 RESOURCE_ALREADY_EXIST: accepted before (a retry); what it became decides.
        receipt = self.transaction_status(kind=product, reference=reference)
        return receipt if receipt.provider_reference else ProviderReceipt(reference_id(reference))

    def transaction_status(
        self, *, kind: str, reference: str, phone: str = "", account_number: str = ""
    ) -> ProviderReceipt:
        """What MTN says of our request: SUCCESSFUL completes (its financialTransactionId is the
        provider reference), FAILED fails (its reason mapped), PENDING and unknown wait."""
        try:
            body = self.client.status(kind, reference_id(reference))
        except MtnUnavailable as down:
            raise self._outage(down.step, down.why) from None
        except MtnRefused as refused:
            raise self._outage(refused.step, f"refused: {refused.code}") from None
        self._succeeded()
        if body is None:
            return ProviderReceipt(provider_reference="")
        status = body["status"].upper()
        transaction_id = str(body.get("financialTransactionId") or "")[:64]
        code = failure_code(body) if status == "FAILED" else ""
        self._answer_keep(
            kind, reference, status=status, raw_code=code, transaction_id=transaction_id
        )
        provider_reference = transaction_id or reference_id(reference)
        if status == "SUCCESSFUL":
            return ProviderReceipt(provider_reference=provider_reference, outcome=COMPLETED)
        if status == "FAILED":
            return ProviderReceipt(
                provider_reference=provider_reference, outcome=FAILED, reason=failure_reason(code)
            )
        return ProviderReceipt(provider_reference=reference_id(reference))

    def _outage(self, step: str, why: str) -> ProviderUnavailable:
        rails_services.connection_failed(
            name=self.connection.name, step=step, message=why, at=timezone.now()
        )
        return ProviderUnavailable(f"MTN MoMo {self.connection.name}: {step}: {why}")

    def _succeeded(self) -> None:
        rails_services.connection_succeeded(name=self.connection.name, at=timezone.now())

    def _answer_keep(
        self, product: str, reference: str, *, status: str, raw_code: str, transaction_id: str = ""
    ) -> None:
        rails_services.answer_record(
            connection=self.connection.name,
            product=product,
            reference=reference,
            status=status,
            raw_code=raw_code,
            financial_transaction_id=transaction_id,
            at=timezone.now(),
        )

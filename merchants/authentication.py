from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from core.exceptions import AUTH_CHALLENGE
from merchants import services


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """X-Api-Key + X-Api-Secret. The authenticated principal is the merchant; the key is auth."""

    def authenticate(self, request):
        key = request.headers.get("X-Api-Key", "")
        secret = request.headers.get("X-Api-Secret", "")
        if not key or not secret:
            raise exceptions.NotAuthenticated(
                "Both X-Api-Key and X-Api-Secret headers are required."
            )
        try:
            api_key = services.api_key_authenticate(key=key, secret=secret)
        except services.InvalidCredentials as exc:
            raise exceptions.AuthenticationFailed(exc.message) from None
        request._request.merchant = api_key.merchant
        return api_key.merchant, api_key

    def authenticate_header(self, request) -> str:
        return AUTH_CHALLENGE


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "merchants.authentication.ApiKeyAuthentication"
    name = ["ApiKey", "ApiSecret"]

    def get_security_definition(self, auto_schema):
        return [
            {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            {"type": "apiKey", "in": "header", "name": "X-Api-Secret"},
        ]

"""What the API reads and writes: JSON, whatever else a client asks for."""

import codecs
import json

from rest_framework.exceptions import NotAcceptable, ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.utils import json as drf_json


class JsonParser(JSONParser):
    """DRF's JSON parser, with a body nested deeper than Python's recursion limit a 400, and an
    object naming a member twice a 400 too: which of the two counts differs from one parser to
    the next (a merchant's gateway may have checked the first, Python keeps the last)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})  # text codecs only, as DRF's
        try:
            return drf_json.load(
                codecs.getreader(encoding)(stream),
                parse_constant=drf_json.strict_constant if self.strict else None,
                object_pairs_hook=_object_without_duplicates,
            )
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise ParseError(f"JSON parse error - the member {name!r} appears more than once.")
            seen.add(name)
    return members


class JsonWhateverTheAccept(DefaultContentNegotiation):
    """A client whose Accept names nothing we render (a browser's text/html) still gets the
    view's first renderer, JSON on the API, instead of a 406; a `?format=` naming nothing we
    render is ignored, as other unknown query parameters are (DRF answered 404, which says the
    resource does not exist)."""

    def filter_renderers(self, renderers, format):
        return [renderer for renderer in renderers if renderer.format == format] or renderers

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type


class JsonErrors:
    """For a view whose document is not JSON (a CSV statement, the OpenAPI schema, the docs
    page): an error, or anything else that is not its document (OPTIONS metadata), keeps the
    API's JSON shape whatever the negotiation said."""

    def is_document(self, response: Response) -> bool:
        return response.status_code < 400

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        metadata = request.method == "OPTIONS"
        if isinstance(response, Response) and (metadata or not self.is_document(response)):
            response.accepted_renderer = JsonRenderer()
            response.accepted_media_type = JsonRenderer.media_type
        return response


class JsonRenderer(JSONRenderer):
    """DRF's JSON renderer. A lone surrogate (a client's "\\ud800" echoed in an error message)
    cannot be encoded as UTF-8; such a response is written with every non-ASCII character
    escaped instead, which is the same JSON."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return json.dumps(data, cls=self.encoder_class, allow_nan=False).encode("ascii")

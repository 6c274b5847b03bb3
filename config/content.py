"""What the API reads and writes: JSON, whatever else a client asks for."""

import json

from rest_framework.exceptions import NotAcceptable, ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer


class JsonParser(JSONParser):
    """DRF's JSON parser, with a body nested deeper than Python's recursion limit a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None


class JsonWhateverTheAccept(DefaultContentNegotiation):
    """A client whose Accept names nothing we render (a browser's text/html) still gets the
    view's first renderer, JSON on the API, instead of a 406."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type


class JsonRenderer(JSONRenderer):
    """DRF's JSON renderer. A lone surrogate (a client's "\\ud800" echoed in an error message)
    cannot be encoded as UTF-8; such a response is written with every non-ASCII character
    escaped instead, which is the same JSON."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return json.dumps(data, cls=self.encoder_class, allow_nan=False).encode("ascii")

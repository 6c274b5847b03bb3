"""One cursor pagination for every list endpoint.

Newest first, ordered by (created_at, id) descending. The cursor is an opaque URL-safe token
(CURSOR_PATTERN) holding the (created_at, id) of the last item of the page: the next page is
the rows strictly after it in that order, so a page is one index range scan on (merchant,
-created_at, -id) however deep it is, and rows inserted meanwhile never shift a page.

Body: {"data": [...], "has_more": bool, "next_cursor": str | null}. Query parameters are read
by a ListQueryInput subclass; a bad `limit`, `cursor` or filter is a 400 naming the parameter.
"""

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from core.fields import StrictCharField, StrictIntegerField

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


@dataclass(frozen=True)
class PageRequest:
    limit: int = DEFAULT_LIMIT
    after: tuple[datetime, UUID] | None = None


@dataclass(frozen=True)
class Page:
    items: list[Any]
    has_more: bool
    next_cursor: str | None


# A cursor: the row's created_at in microseconds since the epoch, "_", its id in hex. Any string
# this pattern takes is a cursor (17 digits stay within datetime's range), so the schema can say
# exactly which are valid (config.schema).
CURSOR_PATTERN = r"^[0-9]{1,17}_[0-9a-f]{32}$"
_CURSOR = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cursor_encode(*, created_at: datetime, id: UUID) -> str:
    micros = (created_at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}_{id.hex}"


def cursor_decode(token: str) -> tuple[datetime, UUID]:
    """The (created_at, id) of a cursor; ValueError when it is not one of ours."""
    if _CURSOR.fullmatch(token):
        micros, id_hex = token.split("_")
        return _EPOCH + timedelta(microseconds=int(micros)), UUID(hex=id_hex)
    return _cursor_decode_base64_json(token)


def _cursor_decode_base64_json(token: str) -> tuple[datetime, UUID]:
    """A cursor given out before the pattern above (base64 of [created_at, id] in JSON), still
    taken so that a merchant paging through a list during the deploy is not cut off."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        parts = json.loads(raw)
        if not (isinstance(parts, list) and all(isinstance(part, str) for part in parts)):
            raise ValueError("not a list of strings")
        created_text, id_text = parts
        created_at = parse_datetime(created_text)
        if created_at is None or created_at.tzinfo is None:
            raise ValueError("bad timestamp")
        return created_at, UUID(id_text)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError("not a cursor") from exc


def paginate(queryset: QuerySet, *, page: PageRequest) -> Page:
    """One page of `queryset` (already narrowed to one merchant and the filters), newest first."""
    queryset = queryset.order_by("-created_at", "-id")
    if page.after is not None:
        created_at, last_id = page.after
        # created_at <= c bounds the index range; the OR only decides ties on created_at.
        queryset = queryset.filter(created_at__lte=created_at).filter(
            Q(created_at__lt=created_at) | Q(id__lt=last_id)
        )
    rows = list(queryset[: page.limit + 1])
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    next_cursor = (
        cursor_encode(created_at=rows[-1].created_at, id=rows[-1].id) if has_more else None
    )
    return Page(items=rows, has_more=has_more, next_cursor=next_cursor)


def page_body(page: Page, item_serializer: type[serializers.Serializer]) -> dict[str, Any]:
    return {
        "data": item_serializer(page.items, many=True).data,
        "has_more": page.has_more,
        "next_cursor": page.next_cursor,
    }


class CursorField(StrictCharField):
    default_error_messages = {"invalid_cursor": "This cursor is not valid; use a next_cursor."}

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 500)
        kwargs.setdefault(
            "help_text", "The next_cursor of the previous page; omit it for the first page."
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            return cursor_decode(value)
        except ValueError:
            self.fail("invalid_cursor")


class ListQueryInput(serializers.Serializer):
    """Query parameters every list takes. Subclasses add their filters (`status` ...).
    validated_data holds `page` (a PageRequest) and the filters, ready for a selector."""

    limit = StrictIntegerField(
        required=False, min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT
    )
    cursor = CursorField(required=False)
    created_gte = serializers.DateTimeField(
        required=False, help_text="Only items created at or after this ISO 8601 time."
    )
    created_lt = serializers.DateTimeField(
        required=False,
        help_text=(
            "Only items created before this ISO 8601 time; at or before created_gte, the"
            " range is empty and the page has no items."
        ),
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = dict(attrs)
        attrs["page"] = PageRequest(limit=attrs.pop("limit"), after=attrs.pop("cursor", None))
        return attrs


def filtered(
    queryset: QuerySet,
    *,
    created_gte: datetime | None,
    created_lt: datetime | None,
    **equal: Any,
) -> QuerySet:
    """`queryset` narrowed to the rows whose fields equal the `equal` values given (None: not
    filtered) and created in [created_gte, created_lt)."""
    queryset = queryset.filter(
        **{name: value for name, value in equal.items() if value is not None}
    )
    if created_gte is not None:
        queryset = queryset.filter(created_at__gte=created_gte)
    if created_lt is not None:
        queryset = queryset.filter(created_at__lt=created_lt)
    return queryset


def page_serializer(name: str, item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The response component of a list: {"data": [item], "has_more", "next_cursor"}."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "data": item(many=True),
            "has_more": serializers.BooleanField(),
            "next_cursor": serializers.CharField(allow_null=True),
            "__module__": item.__module__,
        },
    )


def parse_query(serializer_class: type[serializers.Serializer], query_params) -> dict[str, Any]:
    """Validated query parameters; a ValidationError (400 naming the parameter) otherwise.
    A parameter given twice is a 400 too: the answer would otherwise depend on which won."""
    repeated = [key for key in query_params if len(query_params.getlist(key)) > 1]
    if repeated:
        raise serializers.ValidationError({key: ["Give this parameter once."] for key in repeated})
    serializer = serializer_class(data={key: query_params.get(key) for key in query_params})
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)

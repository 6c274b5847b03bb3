"""Serializer fields shared by every app: ISO country codes, phone numbers, dates."""

import re
import unicodedata
from datetime import UTC, date, datetime, timedelta, timezone

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

ISO_3166_ALPHA2 = frozenset(
    (
        "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ "
        "BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM "
        "DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS "
        "GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN "
        "KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ "
        "MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM "
        "PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV "
        "SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI "
        "VN VU WF WS YE YT ZA ZM ZW "
    ).split()
)

# The service's countries keep one UTC offset all year (none has daylight time): their dates
# need no time zone database.
COUNTRY_UTC_OFFSETS = {
    "CM": timedelta(hours=1),
    "BJ": timedelta(hours=1),
    "SN": timedelta(0),
    "CI": timedelta(0),
    "TG": timedelta(0),
}


def country_date(at: datetime, country_code: str | None) -> date:
    """The date `at` falls on in `country_code` (one of the service's countries; UTC's date
    for any other or none): 23:30 UTC on the 26th is the 27th in Douala."""
    offset = COUNTRY_UTC_OFFSETS.get(country_code or "", timedelta(0))
    return at.astimezone(timezone(offset)).date()


def latest_country_date(at: datetime) -> date:
    """The latest date `at` falls on in any of the service's countries."""
    return max(country_date(at, code) for code in COUNTRY_UTC_OFFSETS)


FULL_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
PHONE_PATTERN = re.compile(r"\+?[0-9]{6,15}")
PHONE_SEPARATORS = re.compile(r"[ .()-]")
ASCII_DIGITS = re.compile(r"[0-9]+")
ACCOUNT_IDENTIFIER = re.compile(r"[A-Za-z0-9 ./-]*[A-Za-z0-9][A-Za-z0-9 ./-]*")


# How every timestamp leaves the service (API, webhook bodies, locked pricing, statements):
# UTC, always six fraction digits, "Z". DRF's ISO 8601 (and isoformat) drop the fraction when
# it is zero and write "+00:00" for an offset, so the same API showed three forms.
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_timestamp(value: datetime) -> str:
    """`value` (aware) as the API shows a timestamp: 2026-01-02T03:04:05.000000Z."""
    return value.astimezone(UTC).isoformat(timespec="microseconds").removesuffix("+00:00") + "Z"


class PricingField(serializers.DictField):
    """What a quote locked (fee, FX, routing), its `locked_at` and `expires_at` as every other
    timestamp: quotes made before they were stored that way hold them as isoformat wrote them."""

    TIMES = ("locked_at", "expires_at")

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "Everything the quote locked: fee, FX, routing.")
        super().__init__(**kwargs)

    def to_representation(self, value):
        data = super().to_representation(value)
        for name in self.TIMES:
            text = data.get(name)
            if not isinstance(text, str) or text.endswith("Z"):  # stored as shown already
                continue
            moment = parse_datetime(text)
            if moment is not None and moment.tzinfo is not None:
                data[name] = format_timestamp(moment)
        return data


class StrictCharField(serializers.CharField):
    """A CharField that takes only JSON strings: 42 is not "42"."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


# Bidi embeddings, overrides and isolates: no name or reference needs them, and they make one
# read backwards in the dashboard (LRM/RLM marks, used in mixed-script text, stay allowed).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class TextLineField(StrictCharField):
    """One line of visible text: a name, an address line, a reference. Control characters
    (tab, CR, LF, DEL, C1), bidi embedding, override and isolate characters are refused, and
    a value of only invisible characters (zero-width spaces, a BOM, marks) is blank."""

    default_error_messages = {
        "control": "Must not contain control characters ({code}).",
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        for char in value:
            if unicodedata.category(char) == "Cc" or char in BIDI_CONTROLS:
                self.fail("control", code=f"U+{ord(char):04X}")
        if all(unicodedata.category(char) == "Cf" or char.isspace() for char in value):
            self.fail("blank")
        return value


class AccountIdentifierField(TextLineField):
    """A bank code or account number, which the provider matches exactly: ASCII letters and
    digits, with the spaces, hyphens, dots and slashes people write between groups, kept as
    written ("SN08 SN01 0015 2000 0625 0000 3512"). Fullwidth or Arabic-Indic digits and other
    scripts' look-alikes (shown as 012345 in the dashboard, no bank's account) are refused."""

    default_error_messages = {
        "not_an_identifier": "Use ASCII letters and digits, optionally separated by spaces, "
        "hyphens, dots or slashes.",
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not ACCOUNT_IDENTIFIER.fullmatch(value):
            self.fail("not_an_identifier")
        return value


class EmailAddressField(serializers.EmailField):
    """An email address given as a JSON string, with no control, format or separator character
    anywhere in it. Django's validator takes any character from U+00A1 up in the domain: a
    bidi override, a zero-width space or a soft hyphen there made an address that shows as
    another one (or as a valid one) in the dashboard and that no mail server delivers to."""

    default_error_messages = {
        "not_a_string": "Must be a string.",
        "invisible": "An email address must not contain control, invisible or space "
        "characters ({code}).",
    }

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        value = super().to_internal_value(data)
        for char in value:
            if unicodedata.category(char)[0] in "CZ":
                self.fail("invisible", code=f"U+{ord(char):04X}")
        return value


class StrictUUIDField(serializers.UUIDField):
    """A UUID given as a JSON string only (DRF would also take an integer or a boolean)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A query parameter's whole number in ASCII digits only (Python's int() would also take
    "1_0", " 5", "+5" and other scripts' digits)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not ASCII_DIGITS.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class CountryCodeField(StrictCharField):
    """ISO 3166-1 alpha-2, upper case, exactly two characters."""

    default_error_messages = {
        "invalid_country": "'{value}' is not an ISO 3166-1 alpha-2 country code.",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("min_length", 2)
        kwargs.setdefault("max_length", 2)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in ISO_3166_ALPHA2:
            self.fail("invalid_country", value=value)
        return value


class PhoneField(StrictCharField):
    """A phone number of 6 to 15 digits with an optional leading + (E.164 recommended).

    Spaces, dots, hyphens and parentheses people write between digits are accepted and
    dropped: "+221 77-000 (00) 01" is stored as "+221770000001".
    """

    default_error_messages = {
        "invalid_phone": "Enter a phone number of 6 to 15 digits, optionally starting with +.",
        "zero_country_code": "A number starting with + begins with its country code, never 0.",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 32)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = PHONE_SEPARATORS.sub("", super().to_internal_value(data))
        if not PHONE_PATTERN.fullmatch(value):
            self.fail("invalid_phone")
        if value.startswith("+0"):  # E.164: no country code starts with 0 ("+00221…" is 00221…)
            self.fail("zero_country_code")
        return value


class FullDateField(serializers.DateField):
    """An ISO 8601 full-date, YYYY-MM-DD only (DRF also takes 19900517 and week dates)."""

    def to_internal_value(self, value):
        if isinstance(value, str) and not FULL_DATE.fullmatch(value):
            self.fail("invalid", format="YYYY-MM-DD")
        return super().to_internal_value(value)

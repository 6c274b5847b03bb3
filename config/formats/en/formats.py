"""The dashboard's dates and times (Django's `date` filter and read-only fields): ISO 8601 with
seconds and zone, as the API writes them (the settings' TIME_ZONE is UTC)."""

DATETIME_FORMAT = r"Y-m-d\TH:i:s\Z"
SHORT_DATETIME_FORMAT = r"Y-m-d\TH:i:s\Z"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"

"""gunicorn's settings for the Procfile's web process (`--config python:config.gunicorn_conf`):
its own lines (errors, and one access line per request) are JSON like Django's, with the
request id of the request they are about (settings.LOGGING)."""

import logging

from config import settings

# The query string and the referer are left out: a dashboard search holds a name or a phone.
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms "%(a)s"'


class DropStaticAccess(logging.Filter):
    """No access line for a static file served (the dashboard's and /docs' CSS, JS and fonts,
    a dozen per page): a refused or missing one is still logged."""

    prefix = "/" + settings.STATIC_URL.lstrip("/")

    def filter(self, record: logging.LogRecord) -> bool:
        atoms = record.args if isinstance(record.args, dict) else {}
        path, status = str(atoms.get("U", "")), str(atoms.get("s", ""))
        return not (path.startswith(self.prefix) and status[:1] in ("2", "3"))


_handler = {"handlers": ["console"], "propagate": False, "level": "INFO"}
logconfig_dict = {
    **settings.LOGGING,
    "filters": {
        **settings.LOGGING["filters"],
        "no_static_access": {"()": f"{__name__}.DropStaticAccess"},
    },
    "loggers": {
        **settings.LOGGING["loggers"],
        "gunicorn.error": _handler,
        "gunicorn.access": {**_handler, "filters": ["no_static_access"]},
    },
}

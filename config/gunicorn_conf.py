"""gunicorn's settings for the Procfile's web process (`--config python:config.gunicorn_conf`):
its own lines (errors, and one access line per request) are JSON like Django's, with the
request id of the request they are about (settings.LOGGING)."""

from config import settings

# The query string and the referer are left out: a dashboard search holds a name or a phone.
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms "%(a)s"'

_handler = {"handlers": ["console"], "propagate": False, "level": "INFO"}
logconfig_dict = {
    **settings.LOGGING,
    "loggers": {
        **settings.LOGGING["loggers"],
        "gunicorn.error": _handler,
        "gunicorn.access": _handler,
    },
}

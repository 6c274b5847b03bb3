import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.celery import app as celery_app  # noqa: E402 - Django is set up by now

# The tasks the services enqueue by name (core.jobs), registered before the first request.
celery_app.loader.import_default_modules()

# What is loaded by now lives as long as the process: keep it out of the cyclic collector's
# full collections, which otherwise stall a request for ~100 ms every couple of thousand
# requests here (~25 ms after; see docs/decisions.md).
gc.freeze()

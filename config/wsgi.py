import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# What is loaded by now lives as long as the process: keep it out of the cyclic collector's
# full collections, which otherwise stall a request for ~100 ms every couple of thousand
# requests here (~25 ms after; see docs/decisions.md).
gc.freeze()

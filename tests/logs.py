"""What the configured log handler (settings.LOGGING's "console") writes, as parsed lines."""

import contextlib
import io
import json
import logging
from collections.abc import Iterator


def console_handler() -> logging.StreamHandler:
    return next(h for h in logging.getLogger().handlers if h.get_name() == "console")


@contextlib.contextmanager
def console_lines() -> Iterator[list[dict]]:
    """The lines written inside the block, each parsed as the JSON object it must be."""
    handler = console_handler()
    stream = io.StringIO()
    previous = handler.setStream(stream)
    lines: list[dict] = []
    try:
        yield lines
    finally:
        handler.setStream(previous)
        lines.extend(json.loads(line) for line in stream.getvalue().splitlines())

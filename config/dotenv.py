"""The `.env` file, read the way bin/run-procfile reads it for the Procfile's own variables, so
that one file means one thing to `make run` and to the settings.

One `NAME=value` per line (`export ` allowed); lines starting with `#` are comments. A value in
double or single quotes is taken as it is between them; otherwise a comment after a blank
(`PORT=8000  # mine`) and trailing blanks are dropped, and a `#` with no blank before it stays
(`SECRET_KEY=abc#def`). The environment wins over the file.

django-environ's reader (which the settings used) kept the comment in the value: a line of
.env.example uncommented as it stands, `WEBHOOK_ALLOW_HTTP=true  # ...`, read as false.
"""

import os
import re
from pathlib import Path

_ASSIGNMENT = re.compile(r"\A(?:export )?([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.S)
_QUOTED = re.compile(r"""\A(?:"([^"]*)"|'([^']*)')""")
_TRAILING_COMMENT = re.compile(r"\s#.*\Z", re.S)


def parse(text: str) -> dict[str, str]:
    """The variables a .env text sets, in order; a name set twice keeps its last value."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        assignment = _ASSIGNMENT.match(line)
        if assignment is None:
            continue
        name, value = assignment.groups()
        quoted = _QUOTED.match(value)
        if quoted is not None:
            value = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
        else:
            value = _TRAILING_COMMENT.sub("", value).rstrip()
        values[name] = value
    return values


def read(path: Path) -> None:
    """Put the file's variables into os.environ, each unless the environment already has it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    for name, value in parse(text).items():
        os.environ.setdefault(name, value)

"""No index is a plain prefix of another on the same table: the longer one already serves its
lookups, and every extra index costs each insert (and each update of an indexed column)."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

_INDEXES = """
SELECT t.relname, i.relname, x.indkey::int2[], x.indisunique, x.indpred IS NOT NULL
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' AND x.indisvalid
  AND t.relname !~ '^(auth|django)_'  -- Django's own tables are not ours to change
"""


def test_no_index_is_a_redundant_prefix_of_another():
    with connection.cursor() as cursor:
        cursor.execute(_INDEXES)
        indexes = cursor.fetchall()
    redundant = [
        f"{table}.{name} {list(columns)} is a prefix of {other_name} {list(other_columns)}"
        for table, name, columns, unique, partial in indexes
        if not unique and not partial  # a unique or partial index says more than its columns
        for other_table, other_name, other_columns, _, other_partial in indexes
        if other_table == table
        and other_name != name
        and not other_partial
        and len(other_columns) > len(columns)
        and list(other_columns[: len(columns)]) == list(columns)
    ]
    assert redundant == [], "\n".join(redundant)

"""Reads by equality, inserts and updates for the hottest paths, without the ORM's per-call
query compilation (~0.3 ms of CPU a statement here, more than the query itself takes in
PostgreSQL).

A `RowReader` is built once per shape at import: its SQL is generated from the model's own
metadata, its parameters are prepared by the model's fields and its rows converted by the same
converters the ORM uses, so the instances it returns are what `filter(...)` would have given
(on PostgreSQL and on the embedded SQLite alike); on PostgreSQL its rows can also come as one
jsonb annotation of another reader's statement (`jsonb_array`, read back by `from_jsonb`).
`update` writes named fields as `save(update_fields=...)` would, `update_where` as
`filter(...).update(...)` would; `insert` and `insert_many` add rows as `save()` would,
`insert_if_absent` unless the row already exists;
`save_together` writes rows that change together in one statement (a guard, increments,
hand-written parts; `upsert_part`, a part that inserts a row or updates it), and `holding` keeps
such writes back to send them with more; `riding` sends a statement in front of the next read
instead. Anything else stays on the ORM."""

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import AutoField, Field, Model
from django.db.models.constants import OnConflict


def _db() -> BaseDatabaseWrapper:
    """This thread's connection itself: the fields' per-value methods then reach its `ops` and
    `features` directly instead of through `django.db.connection`'s proxy (a thread-local
    lookup per access, dozens per request)."""
    return connections[DEFAULT_DB_ALIAS]


class RowReader:
    def __init__(
        self,
        model: type[Model],
        *,
        where: Sequence[str],
        or_null: Sequence[str] = (),
        greater_than: Sequence[str] = (),
        is_null: Sequence[str] = (),
        order_by: Sequence[str] = (),
        for_update: bool = False,
        skip_locked: bool = False,
        annotations: dict[str, tuple[str, Sequence[Field]]] | None = None,
        related: Sequence[str] = (),
    ) -> None:
        """`where`: field names compared for equality, then `greater_than`: field names the
        row's value must exceed, in the order of the values given to `first`/`all`; `or_null`:
        those of `where` that also match NULL; `is_null`: fields that must be NULL (no value);
        `order_by`: field names, "-name" descending; `for_update`: lock the rows read until the
        caller's transaction ends (where the database can), `skip_locked`: passing over the
        rows another transaction has locked. `annotations`: attribute name -> (an SQL
        expression over the row, the fields that prepare its placeholders' values, given as
        `annotation_values`), set on each instance read. `related`: non-null foreign keys whose
        row is read in the same statement (an inner join) and cached on the instance, as
        `select_related` would (not with `for_update`)."""
        opts = model._meta
        self.model = model
        self.fields = list(opts.concrete_fields)
        self.where_fields = [opts.get_field(name) for name in where]
        self.greater_fields = [opts.get_field(name) for name in greater_than]
        self.null_fields = [opts.get_field(name) for name in is_null]
        self.or_null = {opts.get_field(name) for name in or_null}
        self.order_by = [
            (opts.get_field(name.lstrip("-")).column, name.startswith("-")) for name in order_by
        ]
        self.for_update = for_update
        self.skip_locked = skip_locked
        self.annotations = annotations or {}
        self.related = [opts.get_field(name) for name in related]
        if any(not fk.many_to_one or fk.null for fk in self.related) or (
            self.related and for_update
        ):
            raise ValueError("related: non-null foreign keys only, and not with for_update.")
        # what each row and each call need, worked out once
        self._attnames = [field.attname for field in self.fields]
        self._pk_index = self.fields.index(opts.pk)
        self._related_attnames = [
            [field.attname for field in fk.related_model._meta.concrete_fields]
            for fk in self.related
        ]
        self._param_fields = [
            *(field for _, fields in self.annotations.values() for field in fields),
            *self.where_fields,
            *self.greater_fields,
        ]
        self._sql = ""
        self._converters: list[tuple[int, Any, list[Callable]]] = []

    def _prepare(self) -> str:
        if not self._sql:
            quote = connection.ops.quote_name
            table = self.model._meta.db_table

            def qualified(column: str) -> str:
                return f"{quote(table)}.{quote(column)}"

            selected = [(table, field) for field in self.fields]
            joins = ""
            for number, fk in enumerate(self.related):
                alias, target = f"related{number}", fk.related_model._meta
                selected += [(alias, field) for field in target.concrete_fields]
                joins += (
                    f" INNER JOIN {quote(target.db_table)} {alias}"
                    f" ON {alias}.{quote(fk.target_field.column)} = {qualified(fk.column)}"
                )
            columns = ", ".join(
                [f"{quote(alias)}.{quote(field.column)}" for alias, field in selected]
                + [f"({expression})" for expression, _ in self.annotations.values()]
            )
            where = " AND ".join(
                [
                    f"({qualified(field.column)} = %s OR {qualified(field.column)} IS NULL)"
                    if field in self.or_null
                    else f"{qualified(field.column)} = %s"
                    for field in self.where_fields
                ]
                + [f"{qualified(field.column)} > %s" for field in self.greater_fields]
                + [f"{qualified(field.column)} IS NULL" for field in self.null_fields]
            )
            sql = f"SELECT {columns} FROM {quote(table)}{joins} WHERE {where}"  # noqa: S608 (model metadata)
            if self.order_by:
                sql += " ORDER BY " + ", ".join(
                    qualified(column) + (" DESC" if descending else "")
                    for column, descending in self.order_by
                )
            converters = []
            for index, (alias, field) in enumerate(selected):
                column = field.get_col(alias)
                found = connection.ops.get_db_converters(column) + column.get_db_converters(
                    connection
                )
                if found:
                    converters.append((index, column, found))
            # Assigned whole, converters first: threads racing here build the same values.
            self._converters = converters
            self._sql = sql
        return self._sql

    def _rows(
        self, values: Sequence[Any], limit: str = "", annotation_values: Sequence[Any] = ()
    ) -> list[Model]:
        db = _db()
        sql = self._prepare() + limit
        if self.for_update and db.features.has_select_for_update:
            sql += " FOR UPDATE"
            if self.skip_locked and db.features.has_select_for_update_skip_locked:
                sql += " SKIP LOCKED"
        params = [
            field.get_db_prep_value(value, db, prepared=False)
            for field, value in zip(self._param_fields, [*annotation_values, *values], strict=True)
        ]
        ride = _RIDE.get()
        if ride is not None and not ride.sent and db.vendor == "postgresql":
            return self._rows_with(ride, sql, params, db)
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return self._instances(cursor.fetchall(), db)

    def _rows_with(
        self, ride: "Ride", sql: str, params: list[Any], db: BaseDatabaseWrapper
    ) -> list[Model]:
        """The read, with `ride`'s statement in front of it: one row of the ride's value and
        each row read (none read: one row, the read's columns NULL; a row read has its primary
        key)."""
        statement = (
            f"WITH ride AS ({ride.sql}) SELECT ride_value.value, r.*"  # noqa: S608 (our statements)
            " FROM (SELECT (SELECT * FROM ride) AS value) ride_value"
            f" LEFT JOIN LATERAL ({sql}) r ON true"
        )
        with db.cursor() as cursor:
            cursor.execute(statement, [*ride.params, *params])
            rows = cursor.fetchall()
        ride.sent, ride.value = True, rows[0][0]
        ride.after(ride.value)
        pk = 1 + self._pk_index
        return self._instances([row[1:] for row in rows if row[pk] is not None], db)

    def columns(self, alias: str) -> str:
        """The model's columns qualified by `alias`, in the order `read` expects them: for the
        RETURNING or SELECT list of a hand-written statement (not with `related`; the
        annotations' columns, if any, are the statement's to add after these)."""
        quote = connection.ops.quote_name
        return ", ".join(f"{quote(alias)}.{quote(field.column)}" for field in self.fields)

    def read(self, sql: str, params: Sequence[Any]) -> list[Model]:
        """The instances of the rows a hand-written statement returns, its columns those of
        `columns()` then one per annotation, in their order: converted as this reader's own
        rows are. `params` as the cursor takes them."""
        if self.related:
            raise ValueError("read: a reader without related rows.")
        self._prepare()
        db = _db()
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return self._instances(cursor.fetchall(), db)

    def _instances(self, rows: Sequence[Sequence[Any]], db: BaseDatabaseWrapper) -> list[Model]:
        instances = []
        for row in rows:
            row = list(row)
            for index, column, converters in self._converters:
                for convert in converters:
                    row[index] = convert(row[index], column, db)
            start = len(self._attnames)
            instance = self.model.from_db(db.alias, self._attnames, row[:start])
            for fk, names in zip(self.related, self._related_attnames, strict=True):
                end = start + len(names)
                fk.set_cached_value(
                    instance, fk.related_model.from_db(db.alias, names, row[start:end])
                )
                start = end
            for name, value in zip(self.annotations, row[start:], strict=True):
                setattr(instance, name, value)
            instances.append(instance)
        return instances

    def jsonb_array(self) -> tuple[str, list[Field]]:
        """The rows `all` would read, in its order, as one jsonb array: an annotation of another
        reader, `(SQL, the fields that prepare its values)`, its values those `all` takes (on
        PostgreSQL). `from_jsonb` turns what it reads into the instances `all` would give."""
        if self.annotations or self.related or self.for_update:
            raise ValueError("jsonb_array: a plain reader only.")
        quote = connection.ops.quote_name
        order = ", ".join(
            f"r.{quote(column)}" + (" DESC" if descending else "")
            for column, descending in self.order_by
        )
        aggregate = f"jsonb_agg(to_jsonb(r){f' ORDER BY {order}' if order else ''})"
        sql = f"SELECT COALESCE({aggregate}, '[]'::jsonb) FROM ({self._prepare()}) r"  # noqa: S608 (model metadata)
        return sql, list(self._param_fields)

    def from_jsonb(self, text: str | None) -> list[Model]:
        """The instances of what `jsonb_array` read (as text; None: no rows): each column's value
        through its field's `to_python`, numbers read as Decimal, so amounts stay exact."""
        if not text:
            return []
        db = _db()
        return [
            self.model.from_db(
                db.alias,
                self._attnames,
                [field.to_python(row[field.column]) for field in self.fields],
            )
            for row in json.loads(text, parse_float=Decimal)
        ]

    def placeholder(self) -> Model:
        """An instance built from a row of NULLs the way a row read is built: what a caller
        whose miss must cost what a hit does (credentials) holds in place of a row."""
        self._prepare()
        width = len(self._attnames) + sum(map(len, self._related_attnames)) + len(self.annotations)
        return self._instances([(None,) * width], _db())[0]

    def first(self, *values: Any, annotation_values: Sequence[Any] = ()) -> Model | None:
        rows = self._rows(values, " LIMIT 1", annotation_values)
        return rows[0] if rows else None

    def all(self, *values: Any, limit: int | None = None) -> list[Model]:
        return self._rows(values, "" if limit is None else f" LIMIT {int(limit)}")


def _saved_values(instance: Model, field_names: Sequence[str]) -> dict[str, Any]:
    opts = type(instance)._meta
    return {name: opts.get_field(name).pre_save(instance, False) for name in field_names}


def _not_updated(instance: Model) -> DatabaseError:
    return DatabaseError(
        f"{type(instance)._meta.label} {instance.pk} was not updated: no such row."
    )


def update(instance: Model, field_names: Sequence[str]) -> None:
    """UPDATE these fields of the instance's row, as `save(update_fields=...)` would (`auto_now`
    applied), without the ORM's compilation (or signals: none is used in this project)."""
    values = _saved_values(instance, field_names)
    if update_where(type(instance), values, {"pk": instance.pk}) != 1:
        raise _not_updated(instance)


# (model, fields set, fields compared) -> (UPDATE statement, fields set, fields compared)
_UPDATES: dict[tuple, tuple[str, list[Field], list[Field]]] = {}


def _update_shape(
    model: type[Model], set_names: tuple[str, ...], where_names: tuple[str, ...]
) -> tuple[str, list[Field], list[Field]]:
    shape_key = (model, set_names, where_names)
    shape = _UPDATES.get(shape_key)
    if shape is None:
        opts = model._meta
        quote = connection.ops.quote_name
        set_fields = [opts.get_field(name) for name in set_names]
        where_fields = [opts.pk if name == "pk" else opts.get_field(name) for name in where_names]
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in set_fields)
        conditions = " AND ".join(f"{quote(field.column)} = %s" for field in where_fields)
        sql = f"UPDATE {quote(opts.db_table)} SET {assignments} WHERE {conditions}"  # noqa: S608 (model metadata)
        shape = _UPDATES[shape_key] = (sql, set_fields, where_fields)
    return shape


def _update_params(
    set_fields: list[Field], set_values: Sequence[Any], where_fields: list[Field], where: Sequence
) -> list[Any]:
    db = _db()
    params = [
        field.get_db_prep_save(value, db)
        for field, value in zip(set_fields, set_values, strict=True)
    ]
    params += [
        field.get_db_prep_value(value, db, prepared=False)
        for field, value in zip(where_fields, where, strict=True)
    ]
    return params


def update_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> int:
    """`model.objects.filter(**where).update(**values)` for plain field names ("pk" too) and
    equality, without the ORM's compilation. Returns the number of rows updated."""
    sql, set_fields, where_fields = _update_shape(model, tuple(values), tuple(where))
    params = _update_params(set_fields, list(values.values()), where_fields, list(where.values()))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


# model -> (INSERT ... VALUES without the row placeholders, fields written, generated pk or None)
_INSERTS: dict[type[Model], tuple[str, str, list[Field], Field | None]] = {}


def _insert_shape(model: type[Model]) -> tuple[str, str, list[Field], Field | None]:
    shape = _INSERTS.get(model)
    if shape is None:
        opts = model._meta
        quote = connection.ops.quote_name
        generated = opts.pk if isinstance(opts.pk, AutoField) else None
        fields = [field for field in opts.concrete_fields if field is not generated]
        columns = ", ".join(quote(field.column) for field in fields)
        head = f"INSERT INTO {quote(opts.db_table)} ({columns}) VALUES "  # noqa: S608 (model metadata)
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        shape = _INSERTS[model] = (head, row, fields, generated)
    return shape


def _insert_params(instance: Model, fields: list[Field]) -> list[Any]:
    db = _db()
    return [field.get_db_prep_save(field.pre_save(instance, True), db) for field in fields]


def _saved(instance: Model) -> None:
    instance._state.adding = False
    instance._state.db = connection.alias


def insert_many(instances: Sequence[Model]) -> None:
    """INSERT the instances (all of one model) in one statement, as `save()` would each: field
    defaults and `auto_now_add` applied, a database-generated primary key read back. Without
    the ORM's compilation (or signals: none is used in this project)."""
    if not instances:
        return
    model = type(instances[0])
    head, row, fields, generated = _insert_shape(model)
    params = [param for instance in instances for param in _insert_params(instance, fields)]
    sql = head + ", ".join([row] * len(instances))
    with connection.cursor() as cursor:
        if generated is None:
            cursor.execute(sql, params)
        elif connection.features.can_return_rows_from_bulk_insert:
            returning = f" RETURNING {connection.ops.quote_name(generated.column)}"
            cursor.execute(sql + returning, params)
            for instance, (pk,) in zip(instances, cursor.fetchall(), strict=True):
                setattr(instance, generated.attname, pk)
        else:  # one row at a time where the database cannot return them all (older SQLite)
            for index, instance in enumerate(instances):
                cursor.execute(head + row, params[index * len(fields) : (index + 1) * len(fields)])
                setattr(
                    instance,
                    generated.attname,
                    connection.ops.last_insert_id(cursor, model._meta.db_table, generated.column),
                )
    for instance in instances:
        _saved(instance)


def insert(instance: Model) -> Model:
    """INSERT one instance (see `insert_many`) and return it."""
    insert_many([instance])
    return instance


def _keyed_insert_shape(model: type[Model]) -> tuple[str, str, list[Field]]:
    """`_insert_shape` of a model whose primary key is set in Python (ValueError otherwise)."""
    head, row, fields, generated = _insert_shape(model)
    if generated is not None:
        raise ValueError(f"{model._meta.label}: its key is generated by the database.")
    return head, row, fields


def _if_absent_sql(head: str, row: str, fields: list[Field]) -> str:
    """The INSERT of one row that does nothing when it would break a unique constraint."""
    ops = connection.ops
    head = head.replace("INSERT INTO", ops.insert_statement(on_conflict=OnConflict.IGNORE), 1)
    return f"{head}{row} {ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)}"


def insert_if_absent(instance: Model) -> bool:
    """INSERT one instance as `insert` does, unless its row would break a unique constraint
    (ON CONFLICT DO NOTHING, in the same statement). Returns whether it was written. For models
    whose primary key is not generated by the database."""
    head, row, fields = _keyed_insert_shape(type(instance))
    with connection.cursor() as cursor:
        cursor.execute(_if_absent_sql(head, row, fields), _insert_params(instance, fields))
        written = cursor.rowcount == 1
    if written:
        _saved(instance)
    return written


@dataclass
class Part:
    """A hand-written data-modifying CTE of a `save_together` statement: `name` AS (`sql`),
    which returns a row for each row it writes; `{condition}` in `sql` stands for the guard's
    condition (" AND EXISTS (...)", or nothing: put it where an AND would go). `rows`: how many
    rows it wrote, once the statement ran. Its text must not vary with the values written."""

    name: str
    sql: str
    params: list[Any]
    rows: int = 0


def upsert_part(instance: Model, *, unique: Sequence[str], name: str) -> Part:
    """A `save_together` part (PostgreSQL) that inserts the instance as `insert` would, or, when
    a row with the same `unique` fields is there, sets that row's other columns to the
    instance's values (INSERT ... ON CONFLICT DO UPDATE). Its generated key is not read back."""
    model = type(instance)
    head, _, fields, _ = _insert_shape(model)
    opts, ops = model._meta, connection.ops
    unique_columns = [opts.get_field(field_name).column for field_name in unique]
    updated = [field.column for field in fields if field.column not in unique_columns]
    casts = ", ".join(f"CAST(%s AS {_cast_type(field)})" for field in fields)
    conflict = ops.on_conflict_suffix_sql(fields, OnConflict.UPDATE, updated, unique_columns)
    head = head.removesuffix("VALUES ")
    sql = f"{head}SELECT {casts} WHERE TRUE{{condition}} {conflict} RETURNING 1"
    return Part(name=name, sql=sql, params=_insert_params(instance, fields))


# (guard, models and fields of the updates and increments, models of the inserts, parts) ->
# the statement
_TOGETHER: dict[tuple, str] = {}


def save_together(
    *,
    updates: Sequence[tuple[Model, Sequence[str]]] = (),
    inserts: Sequence[Model] = (),
    unless_present: Model | None = None,
    only_if: tuple[Model, Sequence[str], dict[str, Any]] | None = None,
    increments: Sequence[tuple[Model, dict[str, Any], Sequence[str]]] = (),
    also: Sequence[Part] = (),
) -> bool:
    """`update(instance, field_names)` for each of `updates`, then `insert(row)` for each of
    `inserts`, in one statement on PostgreSQL (each a data-modifying CTE: one round trip
    instead of one each; foreign keys between them are checked at the end of the statement),
    one by one elsewhere. Raises DatabaseError when an updated instance's row is gone; the
    caller's transaction then undoes the rest, as it would after `update()`. Rows of different
    tables, or different rows (the CTEs all see the table as it was before the statement).

    A guard makes everything else conditional on it, in the same statement; the return value
    says whether it held (always True without one):
    - `unless_present`: a row inserted first as `insert_if_absent` would (its key set in
      Python): the rest is made only if it was written.
    - `only_if` (PostgreSQL): (instance, field_names, expected) updates these fields of the
      instance's row only while its columns still hold `expected` (field name -> value), as a
      compare-and-set: the rest is made only if it did.

    PostgreSQL only, for a caller that knows the rows exist: `increments`, (instance,
    {field name: delta}, field_names): adds each delta to its column's value in the database
    (not the instance's) and writes the named fields as `update` would; `also`: hand-written
    parts (`Part`).

    While `holding()` (PostgreSQL), a call without a guard or parts writes nothing yet: its
    values are prepared (the instances carry them, `auto_now` and all) and sent later with the
    holder's own, in one statement; it returns True."""
    if unless_present is None and only_if is None and not updates and not inserts:
        return True
    if connection.vendor != "postgresql":
        if only_if is not None or increments or also:
            raise ValueError("save_together: only_if, increments and also need PostgreSQL.")
        if unless_present is not None and not insert_if_absent(unless_present):
            return False
        for instance, field_names in updates:
            update(instance, field_names)
        for row in inserts:
            insert(row)
        return True
    writes = _Writes(unless_present=unless_present, only_if=only_if)
    writes.add(updates=updates, increments=increments, inserts=inserts, also=also)
    held = held_now()
    if held is not None and writes.guard is None and not also:
        held.add_prepared(writes)
        return True
    return writes.send()


_HELD: ContextVar["Held | None"] = ContextVar("rawsql_held", default=None)


class _Writes:
    """The writes of one statement of save_together, their values prepared (pre_save applied,
    so the instances carry them) in the statement's order: guard, updates, increments,
    inserts, parts."""

    def __init__(
        self,
        *,
        unless_present: Model | None = None,
        only_if: tuple[Model, Sequence[str], dict[str, Any]] | None = None,
    ) -> None:
        self.unless_present = unless_present
        self.guard: tuple | None = None
        self.guard_params: list[Any] = []
        if unless_present is not None:
            self.guard = ("absent", *_keyed_insert_shape(type(unless_present)))
            self.guard_params = _insert_params(unless_present, self.guard[3])
        elif only_if is not None:
            self._guard_unchanged(only_if)
        # a SELECT ... FOR UPDATE every write of the statement depends on (Held.only_while)
        self.required: str | None = None
        self.required_params: list[Any] = []
        self.required_found = True  # False once sent if it read no row
        # (instance, shape, parameters) each
        self.updates: list[tuple[Model, tuple, list[Any]]] = []
        self.increments: list[tuple[Model, tuple, list[Any]]] = []
        self.inserts: list[tuple[Model, tuple, list[Any]]] = []
        self.also: list[Part] = []

    def _guard_unchanged(self, only_if: tuple[Model, Sequence[str], dict[str, Any]]) -> None:
        instance, names, expected = only_if
        shape = _update_shape(type(instance), tuple(names), ("pk", *expected))
        self.guard = ("unchanged", shape[0])
        values = list(_saved_values(instance, names).values())
        self.guard_params = _update_params(
            shape[1], values, shape[2], [instance.pk, *expected.values()]
        )

    def add(
        self,
        *,
        updates: Sequence[tuple[Model, Sequence[str]]] = (),
        increments: Sequence[tuple[Model, dict[str, Any], Sequence[str]]] = (),
        inserts: Sequence[Model] = (),
        also: Sequence[Part] = (),
    ) -> None:
        for instance, names in updates:
            shape = _update_shape(type(instance), tuple(names), ("pk",))
            values = list(_saved_values(instance, names).values())
            self.updates.append(
                (instance, shape, _update_params(shape[1], values, shape[2], [instance.pk]))
            )
        for instance, deltas, names in increments:
            shape = _increment_shape(type(instance), tuple(deltas), tuple(names))
            db = _db()
            params = [
                field.get_db_prep_save(value, db)
                for field, value in zip(shape[1], deltas.values(), strict=True)
            ]
            values = list(_saved_values(instance, names).values())
            params += _update_params(shape[2], values, [type(instance)._meta.pk], [instance.pk])
            self.increments.append((instance, shape, params))
        for row in inserts:
            shape = _insert_shape(type(row))
            self.inserts.append((row, shape, _insert_params(row, shape[2])))
        self.also += also

    def add_prepared(self, other: "_Writes") -> None:
        self.updates += other.updates
        self.increments += other.increments
        self.inserts += other.inserts
        self.also += other.also

    def send(self) -> bool:
        """Run the statement; False when its guard did not hold (nothing written)."""
        changed = self.updates + self.increments
        params = [
            *self.required_params,
            *self.guard_params,
            *(param for _, _, part_params in changed for param in part_params),
            *(param for _, _, part_params in self.inserts for param in part_params),
            *(param for part in self.also for param in part.params),
        ]
        shape_key = (
            self.required,
            self.guard and self.guard[:2],  # the kind and the model or statement
            tuple(shape[0] for _, shape, _ in self.updates),
            tuple(shape[0] for _, shape, _ in self.increments),
            tuple(shape[0] for _, shape, _ in self.inserts),
            tuple((part.name, part.sql) for part in self.also),
        )
        sql = _TOGETHER.get(shape_key)
        if sql is None:
            sql = _TOGETHER[shape_key] = _together_sql(
                self.required,
                self.guard,
                [shape for _, shape, _ in changed],
                [shape for _, shape, _ in self.inserts],
                self.also,
            )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            returned = list(cursor.fetchone())
        if self.required is not None:
            self.required_found = returned.pop(0) > 0
            if not self.required_found:
                return False
        if self.guard is not None:
            if returned.pop(0) != 1:
                return False
            if self.unless_present is not None:
                _saved(self.unless_present)
        for (instance, _, _), count in zip(changed, returned, strict=False):
            if count != 1:
                raise _not_updated(instance)
        returned = returned[len(changed) :]
        for (row, shape, _), key in zip(self.inserts, returned, strict=False):
            generated = shape[3]
            if generated is not None:
                setattr(row, generated.attname, key)
            _saved(row)
        for part, count in zip(self.also, returned[len(self.inserts) :], strict=True):
            part.rows = count
        return True


class Held(_Writes):
    """The writes `save_together` held back while `holding()`; `send()` writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: Callable[[], Exception] | None = None
        self.required_refused: Callable[[], Exception] | None = None
        self.after: list[tuple[Callable[[], None], bool]] = []
        self.sent = False  # then nothing more is held: later writes are made at once

    def only_if(
        self, guard: tuple[Model, Sequence[str], dict[str, Any]], refused: Callable[[], Exception]
    ) -> None:
        """Make the held statement a compare-and-set, as `save_together(only_if=guard)`: when
        the row no longer holds what was read, `send()` writes nothing and raises `refused()`.
        One per statement."""
        if self.guard is not None:
            raise ValueError("A held statement has one guard.")
        self._guard_unchanged(guard)
        self.refused = refused

    def only_while(self, sql: str, params: list[Any], refused: Callable[[], Exception]) -> None:
        """Make every write of the held statement (its guard's included) depend on `sql`, a
        SELECT ... FOR UPDATE of rows the statement needs as they are (read first, and locked
        until the statement commits, so no other statement changes them in between): when it
        reads no row, `send()` writes nothing and raises `refused()` (before the guard's
        refusal, which then says nothing). Its text must not vary with the values. One per
        statement."""
        if self.required is not None:
            raise ValueError("A held statement has one only_while.")
        self.required, self.required_params = sql, params
        self.required_refused = refused

    def send(self) -> bool:
        self.sent = True
        if not super().send():
            raise (self.refused if self.required_found else self.required_refused)()
        for callback, robust in self.after:  # in autocommit at once: they write at once too
            transaction.on_commit(callback, robust=robust)
        return True


def held_now() -> Held | None:
    """The writes being held (see `holding`), if any (none once sent)."""
    held = _HELD.get()
    return None if held is None or held.sent else held


def after_write(callback: Callable[[], None], *, robust: bool = False) -> None:
    """`transaction.on_commit(callback)`, for writes that may be held: then it runs once they
    are sent (and committed)."""
    held = held_now()
    if held is None:
        transaction.on_commit(callback, robust=robust)
    else:
        held.after.append((callback, robust))


@contextmanager
def holding() -> Iterator[Held | None]:
    """Hold back the writes of `save_together` calls without a guard or parts (PostgreSQL;
    None and nothing held elsewhere), for the caller to add its own (`held.add(...)`) and send
    them all in one statement (`held.send()`), once it has built what depends on them (a
    response from the instances, whose values are set when the call is made). A write held
    is not in the database until then: no read in between sees it, and its errors (a missing
    row, a broken constraint) are raised by `send()`. A save_together call with a guard is made
    at once; the held statement itself may get one (`Held.only_if`) and a read it depends on
    (`Held.only_while`), and callbacks meant for after its commit are given to `after_write`."""
    if connection.vendor != "postgresql":
        yield None
        return
    held = Held()
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)


@dataclass
class Ride:
    """A data-modifying statement sent in front of the next `RowReader` read made while
    `riding()` (PostgreSQL), for one round trip less: `sql` returns at most one row of one
    column, `value` (None when it returned no row; its text must not vary with the values).
    Once sent, `after(value)` runs, and may raise: the read's rows are then not returned. The
    ride commits with the read (in autocommit at once), whatever the caller does next."""

    sql: str
    params: list[Any]
    after: Callable[[Any], None] = lambda value: None
    sent: bool = False
    value: Any = None


_RIDE: ContextVar[Ride | None] = ContextVar("rawsql_ride", default=None)


@contextmanager
def riding(ride: Ride) -> Iterator[Ride]:
    """Send `ride` with the next RowReader read in this context, if there is one (PostgreSQL
    only; elsewhere it is never sent): the caller checks `ride.sent` and sends it on its own
    when no read took it."""
    token = _RIDE.set(ride)
    try:
        yield ride
    finally:
        _RIDE.reset(token)


# (model, fields added to, fields set) -> (UPDATE statement, fields added to, fields set)
_INCREMENTS: dict[tuple, tuple[str, list[Field], list[Field]]] = {}


def _increment_shape(
    model: type[Model], delta_names: tuple[str, ...], set_names: tuple[str, ...]
) -> tuple[str, list[Field], list[Field]]:
    shape_key = (model, delta_names, set_names)
    shape = _INCREMENTS.get(shape_key)
    if shape is None:
        opts = model._meta
        quote = connection.ops.quote_name
        delta_fields = [opts.get_field(name) for name in delta_names]
        set_fields = [opts.get_field(name) for name in set_names]
        assignments = [f"{quote(f.column)} = {quote(f.column)} + %s" for f in delta_fields]
        assignments += [f"{quote(field.column)} = %s" for field in set_fields]
        sql = (
            f"UPDATE {quote(opts.db_table)} SET {', '.join(assignments)}"  # noqa: S608 (model metadata)
            f" WHERE {quote(opts.pk.column)} = %s"
        )
        shape = _INCREMENTS[shape_key] = (sql, delta_fields, set_fields)
    return shape


def _cast_type(field: Field) -> str:
    """The type a guarded insert casts a value to: the column's, but text for a bounded
    string, whose explicit cast would truncate silently where the insert itself refuses."""
    db_type = field.db_type(connection)
    return "text" if re.fullmatch(r"(varchar|char)\(\d+\)", db_type) else db_type


def _together_sql(
    required: str | None,
    guard: tuple | None,
    update_shapes: list[tuple],
    insert_shapes: list[tuple],
    also: Sequence[Part],
) -> str:
    """save_together's statement. With a guard, every other part is conditional on it: the
    updates by an EXISTS in their WHERE, the inserts as INSERT ... SELECT with the same
    condition (their values cast to the column types, which a SELECT does not infer). With a
    required read (`Held.only_while`), every part, the guard too, is conditional on it."""
    quote = connection.ops.quote_name
    parts, selected, gates = [], [], []
    if required is not None:
        parts.append(f"required AS ({required})")
        selected.append("(SELECT count(*) FROM required)")
        gates.append("EXISTS (SELECT 1 FROM required)")
    if guard is not None:
        if guard[0] == "absent":
            if gates:
                raise ValueError("An unless_present guard cannot depend on a required read.")
            parts.append(f"g AS ({_if_absent_sql(*guard[1:])} RETURNING 1)")
        else:
            required_condition = "".join(f" AND {gate}" for gate in gates)
            parts.append(f"g AS ({guard[1]}{required_condition} RETURNING 1)")
        selected.append("(SELECT count(*) FROM g)")
        gates.append("EXISTS (SELECT 1 FROM g)")
    condition = "".join(f" AND {gate}" for gate in gates)
    updates = [update_sql for update_sql, _, _ in update_shapes]
    for number, update_sql in enumerate(updates):
        parts.append(f"u{number} AS ({update_sql}{condition} RETURNING 1)")
    for number, (head, placeholders, fields, generated) in enumerate(insert_shapes):
        returned = "1" if generated is None else quote(generated.column)
        if condition:
            casts = ", ".join(f"CAST(%s AS {_cast_type(field)})" for field in fields)
            values = f"SELECT {casts} WHERE {' AND '.join(gates)}"
            head = head.removesuffix("VALUES ")
        else:
            values = placeholders
        parts.append(f"i{number} AS ({head}{values} RETURNING {returned})")
    parts += [f"{part.name} AS ({part.sql.format(condition=condition)})" for part in also]
    # the CTEs' own names, numbered: no outside value in this text
    selected += [f"(SELECT count(*) FROM u{number})" for number in range(len(updates))]  # noqa: S608
    selected += [f"(SELECT * FROM i{number})" for number in range(len(insert_shapes))]  # noqa: S608
    selected += [f"(SELECT count(*) FROM {part.name})" for part in also]  # noqa: S608
    return f"WITH {', '.join(parts)} SELECT {', '.join(selected)}"

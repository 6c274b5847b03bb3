"""The dashboard's generic admin machinery: list filters on known values, a paginator that
estimates past a limit, record pages that show values as the lists do, a search by whole id or
reference, read-only inlines and HTML tables. Who may see what (merchant scoping, roles) is
merchants.dashboard."""

import json
import re
import uuid

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.contrib.admin.utils import flatten_fieldsets, get_fields_from_path
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Paginator
from django.db.models import DecimalField, Q, UUIDField
from django.db.models.constants import LOOKUP_SEP
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from unfold.contrib.filters.admin.mixins import DropdownMixin, ValueMixin

from core import display, themed_forms


class ScopedAllValuesFieldListFilter(admin.AllValuesFieldListFilter):
    """The values of a related model's field that the user's own rows reach. Django's filter
    offers those of every row of the related model: another merchant's included."""

    def __init__(self, field, request, params, model, model_admin, field_path):
        super().__init__(field, request, params, model, model_admin, field_path)
        self.lookup_choices = (
            model_admin.get_queryset(request)
            .order_by(field_path)
            .values_list(field_path, flat=True)
            .distinct()
        )


class KnownValuesFieldListFilter(ValueMixin, DropdownMixin, admin.AllValuesFieldListFilter):
    """A filter on a column whose values come from a short known list (the catalog's operator
    codes, the currencies, the event types: `known_values_filter(...)`), not from Django's
    SELECT DISTINCT over the column, which read the whole table (every payin for support,
    every one of the merchant's for its staff) at each page load. The list is the same for
    every merchant, so it tells merchant staff nothing of another's rows; the URL's parameter
    is Django's own (operator_code__exact)."""

    @staticmethod
    def known_values() -> list[str]:
        return []

    def __init__(self, field, request, params, model, model_admin, field_path):
        super().__init__(field, request, params, model, model_admin, field_path)
        self.lookup_choices = list(self.known_values())

    def queryset(self, request, queryset):
        if self.value() in ("", None):
            return queryset  # the dropdown's "All"
        return super().queryset(request, queryset)

    def choices(self, changelist):
        """A dropdown: thirty corridors or two dozen operators as links were a panel of
        their own."""
        yield {
            "form": self.form_class(
                label=f" By {self.title} ",
                name=self.lookup_kwarg,
                choices=[self.all_option, *[(value, value) for value in self.lookup_choices]],
                data={self.lookup_kwarg: self.value()},
                multiple=False,
            ),
        }


def known_values_filter(values) -> type[KnownValuesFieldListFilter]:
    """list_filter = [("operator_code", known_values_filter(selectors.operator_codes))]"""
    return type(
        "KnownValuesFieldListFilter",
        (KnownValuesFieldListFilter,),
        {"known_values": staticmethod(values)},
    )


def past_timeout_filter(rows_past_timeout) -> type[admin.SimpleListFilter]:
    """list_filter = [past_timeout_filter(selectors.past_provider_timeout)]: the worklist's
    `?attention=past_timeout` links, the rows still waiting for the provider past its timeout."""

    class PastTimeoutFilter(admin.SimpleListFilter):
        title = "needs attention"
        parameter_name = "attention"

        def lookups(self, request, model_admin):
            return [("past_timeout", "Past the provider timeout")]

        def queryset(self, request, queryset):
            if self.value() == "past_timeout":
                return rows_past_timeout(queryset, now=timezone.now())
            return queryset

    return PastTimeoutFilter


class EstimatingPaginator(Paginator):
    """Counts a changelist exactly up to DASHBOARD_EXACT_COUNT_LIMIT rows and past that takes
    PostgreSQL's estimate of its rows (never less than the limit): COUNT(*) reads every
    matching row, a whole table of payins or events on support's unfiltered list, and it ran at
    every page load. The exact part is `SELECT COUNT(*) FROM (... LIMIT n + 1)`, which stops
    reading at the limit."""

    @cached_property
    def count(self) -> int:
        limit = settings.DASHBOARD_EXACT_COUNT_LIMIT
        rows = self.object_list.order_by()
        counted = rows[: limit + 1].count()
        if counted <= limit:
            return counted
        plan = json.loads(rows.values("pk").explain(format="json"))
        return max(int(plan[0]["Plan"]["Plan Rows"]), counted)


SHOWN = "_shown"


class ShownAsListed:
    """A record page (or inline) shows times and amounts as the lists do, "4,000 XOF" not
    "4000.00", and JSON as labelled fields (display.record_value): each such field is shown
    by the admin's `<field>_shown`, as Django shows any admin method. On a page the user may
    edit, its read-only fields are shown so, and its amounts' inputs hold "1500", not
    "1500.00" (display.AmountInput)."""

    def view_only(self, request, obj) -> bool:
        if isinstance(self, InlineModelAdmin):
            editable = self.has_add_permission(request, obj) or self.has_change_permission(
                request, obj
            )
            return not editable
        return obj is not None and not self.has_change_permission(request, obj)

    def get_form(self, request, obj=None, change=False, **kwargs):
        # A field the form declares itself (an invitation's username, an endpoint's URL) is
        # drawn with the theme's widget as the model's fields are.
        return themed_forms.themed(super().get_form(request, obj, change, **kwargs))

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if isinstance(db_field, DecimalField):
            kwargs["widget"] = display.AmountInput
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.shown_too(super().get_readonly_fields(request, obj))

    def shown_too(self, names) -> list:
        """Read-only fields, and the `_shown` of each the lists show their own way (an admin
        that overrides get_readonly_fields returns its list through this)."""
        names = list(names)
        shown = [f"{n}{SHOWN}" for n in names if isinstance(n, str) and self._field_shown(n)]
        return [*names, *(name for name in shown if name not in names)]

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        only = None  # a view-only page: every field
        if not self.view_only(request, obj):
            readonly = set(self.get_readonly_fields(request, obj))
            only = {name for name in readonly if f"{name}{SHOWN}" in readonly}
        return [
            (title, {**opts, "fields": self._shown(opts["fields"], only)})
            for title, opts in fieldsets
        ]

    def _shown(self, names, only: set | None) -> list:
        shown = []
        for name in names:
            if isinstance(name, (list, tuple)):  # fields on one line
                name = tuple(self._shown(name, only))
            elif isinstance(name, str) and (only is None or name in only):
                name = f"{name}{SHOWN}" if self._field_shown(name) is not None else name
            if name not in shown:
                shown.append(name)
        return shown

    def _unshown(self, name: str) -> str:
        field = name.removesuffix(SHOWN)
        return field if name.endswith(SHOWN) and self._field_shown(field) else name

    def _field_shown(self, name: str):
        try:
            field = self.model._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        return display.record_value(self.model, field) if field.concrete else None

    def __getattr__(self, name: str):
        render = self._field_shown(name.removesuffix(SHOWN)) if name.endswith(SHOWN) else None
        if render is None:
            raise AttributeError(name)
        render.short_description = self.model._meta.get_field(name.removesuffix(SHOWN)).verbose_name
        return render


_WHOLE_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.I)


class ExactSearchMixin:
    """A search that is one whole id or provider reference, as support pastes it from a
    merchant's ticket, is looked up by equality through an index: a UUID on the `=` search
    fields that are UUID columns (compared as UUIDs: Django's `=` compared UPPER(id::text),
    which no index serves), a reference of one of `reference_forms` on
    `exact_reference_fields`. Django's search ORs contains over every field, a scan of the
    whole table (1,000,000 payins: 2 to 6 s). When the lookup finds nothing (an external ref
    that is a UUID, a reference typed in capitals, a row the user may not see) the search is
    Django's as before; any other term is Django's search. Merchant staff look up in their
    own rows only. Put before MerchantScopedAdmin: `class A(ExactSearchMixin, ...Admin)`."""

    reference_forms: tuple[re.Pattern, ...] = ()
    # Columns of the model, or one reverse relation's column ("attempts__provider_reference"),
    # each with an index that serves equality.
    exact_reference_fields: tuple[str, ...] = ()

    def exact_search_fields(self, request) -> list[str]:
        return [
            field[1:]
            for field in self.get_search_fields(request)
            if field.startswith("=")
            and isinstance(get_fields_from_path(self.model, field[1:])[-1], UUIDField)
        ]

    def exact_search(self, request, search_term: str) -> Q | None:
        """The equality lookup a whole id or reference is, None for any other term."""
        term = search_term.strip()
        if _WHOLE_UUID.fullmatch(term):
            value = uuid.UUID(term)
            fields = self.exact_search_fields(request)
            return Q(*[(field, value) for field in fields], _connector=Q.OR) if fields else None
        if self.exact_reference_fields and any(f.fullmatch(term) for f in self.reference_forms):
            return Q(
                *[self._equal_to(path, term) for path in self.exact_reference_fields],
                _connector=Q.OR,
            )
        return None

    def _equal_to(self, path: str, term: str) -> Q:
        relation, _, column = path.rpartition(LOOKUP_SEP)
        if not relation:
            return Q((column, term))
        # A row of a reverse relation: its parents' ids, read first through the relation's
        # index, so the OR stays one of indexed equalities (an IN (subquery) in an OR is
        # checked row by row over the whole table).
        rel = self.model._meta.get_field(relation)
        parents = rel.related_model._default_manager.filter(**{column: term}).values_list(
            rel.field.attname, flat=True
        )
        return Q(pk__in=list(parents))

    def get_search_results(self, request, queryset, search_term):
        exact = self.exact_search(request, search_term)
        if exact is not None:
            found = self.scope_queryset(request, queryset).filter(exact)
            if found.exists():
                return found, False
        return super().get_search_results(request, queryset, search_term)


class ScopedInlineMixin(ShownAsListed):
    """Inlines follow their parent's scoping; they are read-only unless a subclass opens them."""

    def get_formset(self, request, obj=None, **kwargs):
        # An inline's form has the model's fields, each shown by its `_shown` method.
        if "fields" not in kwargs and self.view_only(request, obj):
            names = flatten_fieldsets(self.get_fieldsets(request, obj))
            kwargs["fields"] = [self._unshown(name) for name in names]
        return super().get_formset(request, obj, **kwargs)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return True


def html_table(headers: list[str], rows: list[tuple]) -> str:
    """Rows as an HTML table for a read-only field of a dashboard page, each cell escaped
    unless it is already safe HTML (a link); "—" when there is no row."""
    if not rows:
        return "—"
    head = format_html_join(
        "",
        '<th class="font-semibold pr-4 py-1 text-left whitespace-nowrap">{}</th>',
        ((h,) for h in headers),
    )
    cells = format_html_join(
        "",
        '<tr class="border-t border-base-200">{}</tr>',
        (
            (format_html_join("", '<td class="pr-4 py-1 align-top">{}</td>', ((c,) for c in row)),)
            for row in rows
        ),
    )
    return format_html('<table class="text-sm"><tr>{}</tr>{}</table>', head, cells)

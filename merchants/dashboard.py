"""Who may see and touch what in the dashboard (the Django admin).

Three kinds of users: superusers (ops) configure everything; support staff (the "Support"
group) read every merchant's operational data and run support actions but never see secrets;
merchant staff (a MerchantMembership) see only their own merchant's objects. An object of
another merchant does not exist for merchant staff: 404, never 403.
"""

from django.contrib import admin, messages
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import BooleanField, DateField, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import Http404, HttpResponseRedirect
from unfold import admin as unfold_admin
from unfold.contrib.filters.admin import RangeDateTimeFilter

from core import display
from core.dashboard import EstimatingPaginator, ScopedAllValuesFieldListFilter, ShownAsListed
from core.exceptions import DomainError
from merchants.models import MembershipRole, Merchant

SUPPORT_GROUP = "Support"


def membership_of(user: AbstractBaseUser):
    if not getattr(user, "is_authenticated", False):
        return None
    try:
        return user.merchant_membership
    except AttributeError:
        return None
    except Exception:  # RelatedObjectDoesNotExist
        return None


def merchant_of(user: AbstractBaseUser) -> Merchant | None:
    membership = membership_of(user)
    return membership.merchant if membership else None


def role_of(user: AbstractBaseUser) -> str | None:
    membership = membership_of(user)
    return membership.role if membership else None


def is_support(user: AbstractBaseUser) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    cached = getattr(user, "_cowry_is_support", None)
    if cached is None:
        cached = user.groups.filter(name=SUPPORT_GROUP).exists()
        user._cowry_is_support = cached
    return cached


def is_ops(user: AbstractBaseUser) -> bool:
    return bool(getattr(user, "is_superuser", False) and user.is_active)


def can_manage_credentials(user: AbstractBaseUser) -> bool:
    """Owners and developers manage API keys and webhooks of their merchant."""
    return role_of(user) in (MembershipRole.OWNER, MembershipRole.DEVELOPER)


def can_change_credentials(user: AbstractBaseUser) -> bool:
    """Who may revoke keys and add or change endpoints: their merchant's managers, and ops (who
    never see a secret: adding or rotating a key, or revealing a signing secret, is
    can_manage_credentials alone)."""
    return is_ops(user) or can_manage_credentials(user)


SECRET_FIELDS = frozenset({"signing_secret", "secret_hash"})


class MerchantScopedAdmin(ShownAsListed, unfold_admin.ModelAdmin):
    """Base for every admin of merchant-owned data.

    `merchant_path` is the ORM path from the model to its Merchant ("merchant", "payin__merchant").
    Merchant staff get a queryset narrowed to their merchant, which Django's admin then uses for
    lists, search, filters, detail pages and actions. Writes default to ops only; subclasses
    open them deliberately.
    """

    merchant_path = "merchant"
    support_can_view = True
    merchant_staff_can_view = True
    # A list's pages count what it shows (EstimatingPaginator), never the whole table besides.
    paginator = EstimatingPaginator
    show_full_result_count = False
    # A from/to filter on this time; None for models without one.
    date_range_field: str | None = "created_at"

    def scope_queryset(self, request, queryset: QuerySet) -> QuerySet:
        user = request.user
        if is_ops(user) or (self.support_can_view and is_support(user)):
            return queryset
        merchant = merchant_of(user)
        if merchant is None or not self.merchant_staff_can_view:
            return queryset.none()
        if self.merchant_path == "pk":
            return queryset.filter(pk=merchant.pk)
        return queryset.filter(**{self.merchant_path: merchant})

    def get_queryset(self, request):
        return self.scope_queryset(request, super().get_queryset(request))

    def lookup_allowed(self, lookup, value, request=None) -> bool:
        # The admin takes filters on a model's own fields from the URL: a secret filtered by
        # prefix (?signing_secret__startswith=whsec_a) would be read out one character at a time.
        if any(part in SECRET_FIELDS for part in lookup.split(LOOKUP_SEP)):
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        user = request.user
        if is_ops(user):
            return True
        if is_support(user):
            return self.support_can_view
        return self.merchant_staff_can_view and merchant_of(user) is not None

    def has_add_permission(self, request, *args) -> bool:
        return is_ops(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        return is_ops(request.user)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_support_permission(self, request, obj=None) -> bool:
        """For support actions: `@admin.action(permissions=["support"])`."""
        return is_ops(request.user) or is_support(request.user)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # A rule a service enforces on save (a sixth webhook endpoint) is a message on the
        # form's page, not a 500; the admin's transaction has rolled the save back.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def delete_view(self, request, object_id, extra_context=None):
        # As on save: a rule a service enforces on delete (removing oneself) is a message.
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            # Not found and "another merchant's" look the same: a 404 that confirms nothing.
            raise Http404("Not found.")
        return obj

    def get_list_display(self, request):
        hide = set()
        if merchant_of(request.user) is not None and not is_ops(request.user):
            hide = {"merchant", self.merchant_path}  # always their own
        return display.list_columns(self.model, super().get_list_display(request), hide=hide)

    def get_list_filter(self, request):
        filters = list(super().get_list_filter(request))
        own_fields = {f.name for f in self.model._meta.concrete_fields}
        if self.date_range_field in own_fields and self.date_range_field not in filters:
            filters.append((self.date_range_field, RangeDateTimeFilter))
        if merchant_of(request.user) is not None and not is_ops(request.user):
            filters = [
                self._scoped_filter(f) for f in filters if f not in ("merchant", self.merchant_path)
            ]
        return filters

    def _scoped_filter(self, spec):
        """Django takes the choices of a filter on a relation, or on a related model's field,
        from every row of the related model; merchant staff get those of their own rows."""
        if not isinstance(spec, str):
            return spec
        field = get_fields_from_path(self.model, spec)[-1]
        if field.is_relation:
            return (spec, admin.RelatedOnlyFieldListFilter)
        if LOOKUP_SEP in spec and not (
            field.flatchoices or isinstance(field, (BooleanField, DateField))
        ):
            return (spec, ScopedAllValuesFieldListFilter)
        return spec

    def get_search_results(self, request, queryset, search_term):
        queryset = self.scope_queryset(request, queryset)
        return super().get_search_results(request, queryset, search_term)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        merchant = merchant_of(request.user)
        if merchant is not None and not is_ops(request.user):
            related = db_field.related_model
            if related is Merchant:
                kwargs["queryset"] = Merchant.objects.filter(pk=merchant.pk)
            elif any(f.name == "merchant" for f in related._meta.get_fields()):
                kwargs["queryset"] = related._default_manager.filter(merchant=merchant)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyAdmin(MerchantScopedAdmin):
    """Records no one edits in the dashboard, ops included: they change only through services."""

    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

"""Store-level isolation in the admin: the one place that decides what a staff user may see.

The scope fails closed: a staff user sees and changes only rows of the stores
they are assigned to (Store.staff), and a user with no assignment sees none.
Seeing every store, and the rows that belong to no store, takes the explicit
`stores.view_all_stores` permission (the Managers group) or superuser status.
Nobody changes their own assignments or permissions (stores.admin). Every
admin of store-owned rows mixes in `StoreScopedAdminMixin`, so lists, detail
pages, search, filters, CSV export, actions and the autocomplete all start
from the same filtered queryset, and an object outside the scope is a 404
whichever URL asks for it.
"""

from django.contrib import admin
from django.http import Http404

from stores.models import VIEW_ALL_STORES, Store

_CACHE_ATTRIBUTE = "_store_scope_ids"
VIEW_ALL_STORES_PERMISSION = f"stores.{VIEW_ALL_STORES}"


def sees_every_store(user) -> bool:
    """Whether `user` sees every store's rows and the rows of no store (superusers hold every permission)."""
    return user.is_authenticated and user.is_active and user.has_perm(VIEW_ALL_STORES_PERMISSION)


def store_ids_for(user) -> frozenset[int] | None:
    """The stores `user` is limited to (possibly none), or None for every store. Read once per user object."""
    if not hasattr(user, _CACHE_ATTRIBUTE):
        ids = frozenset()
        if sees_every_store(user):
            ids = None
        elif user.is_authenticated:
            ids = frozenset(Store.staff.through.objects.filter(user_id=user.pk).values_list("store_id", flat=True))
        setattr(user, _CACHE_ATTRIBUTE, ids)
    return getattr(user, _CACHE_ATTRIBUTE)


def store_scope(queryset, user, *, store_path: str = "store"):
    """`queryset` limited to the stores `user` works at; `store_path` leads from the model to the store id."""
    ids = store_ids_for(user)
    if ids is None:
        return queryset
    return queryset.filter(**{f"{store_path}__in": ids})


def stores_visible(user):
    return store_scope(Store.objects.all(), user, store_path="pk")


class StoreListFilter(admin.RelatedFieldListFilter):
    """The store filter, offering only the stores the user may see (the stock one names them all)."""

    def field_choices(self, field, request, model_admin):
        return [(store.pk, str(store)) for store in stores_visible(request.user)]


class StoreScopedAdminMixin:
    """Limits a ModelAdmin to the requesting user's stores. Set `store_path` when the store is not `store`."""

    store_path = "store"

    def get_queryset(self, request):
        return store_scope(super().get_queryset(request), request.user, store_path=self.store_path)

    def get_object(self, request, object_id, from_field=None):
        # Stock admin redirects to the index with "does not exist"; outside the scope the answer is a
        # plain 404, the same as for an id that was never used, so guessing ids tells nothing.
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404
        return obj

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # A form must not accept a store, or a row of a store, the user cannot see.
        related_admin = self.admin_site._registry.get(db_field.related_model)
        if db_field.related_model is Store:
            kwargs["queryset"] = stores_visible(request.user)
        elif isinstance(related_admin, StoreScopedAdminMixin):
            kwargs["queryset"] = related_admin.get_queryset(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

"""The contact admin's duplicates list and merge pages: possible duplicates, a preview, the merge itself.

Mixed into ContactAdmin ahead of the store scoping, so both contacts of a merge come through the
scoped `get_object` (a contact outside the user's stores is a 404) and the list reads only the user's
stores. Merging takes `crm.change_contact`; the form carries Django's CSRF token like every admin form.
"""

from django import forms
from django.apps import apps
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from crm import merge, selectors
from crm.models import Contact
from stores.scoping import store_ids_for


def _rows_text(counts: dict[str, int]) -> str:
    """{"crm.task": 1, "crm.timelineevent": 2} as "1 task, 2 timeline events"; "nothing" when all are 0."""
    parts = []
    for label, count in counts.items():
        names = apps.get_model(label)._meta
        if count:
            parts.append(f"{count} {names.verbose_name if count == 1 else names.verbose_name_plural}")
    return ", ".join(parts) or "nothing"


class ContactMergeForm(forms.Form):
    """The merge as the preview showed it: a choice per field that differs, and each contact's `updated_at`."""

    survivor_seen = forms.DateTimeField(input_formats=["iso-8601"])
    other_seen = forms.DateTimeField(input_formats=["iso-8601"])

    def __init__(self, *args, plan: merge.MergePlan, **kwargs):
        super().__init__(*args, **kwargs)
        for choice in plan.fields:
            if choice.differs:
                # Not required: a field not picked keeps the preview's default.
                self.fields[f"pick_{choice.name}"] = forms.ChoiceField(
                    choices=[(merge.SURVIVOR, merge.SURVIVOR), (merge.OTHER, merge.OTHER)], required=False
                )

    def picks(self) -> dict[str, str]:
        data = self.cleaned_data
        return {name.removeprefix("pick_"): data[name] for name in self.fields if name[:5] == "pick_" and data[name]}


class ContactMergeAdminMixin:
    # The export's change list with a link to the duplicates (django-import-export renders this one on top).
    import_export_change_list_template = "admin/crm/contact/change_list.html"
    actions = ["merge_selected"]

    def get_urls(self):
        duplicates = self.admin_site.admin_view(self.duplicates_view)
        merge_view = self.admin_site.admin_view(self.merge_view)
        return [
            path("duplicates/", duplicates, name="crm_contact_duplicates"),
            path("merge/<int:first_id>/<int:second_id>/", merge_view, name="crm_contact_merge"),
        ] + super().get_urls()

    @admin.action(description="Merge the two selected contacts…", permissions=["change"])
    def merge_selected(self, request, queryset):
        ids = sorted(queryset.values_list("pk", flat=True)[:3])
        if len(ids) != 2:
            self.message_user(request, "Select exactly two contacts to merge.", messages.WARNING)
            return None
        return HttpResponseRedirect(reverse("admin:crm_contact_merge", args=ids))

    def duplicates_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        pairs = selectors.contact_duplicates(store_ids=store_ids_for(request.user))
        context = {
            **self.admin_site.each_context(request),
            "title": "Possible duplicates",
            "opts": Contact._meta,
            "pairs": pairs,
            "limit": selectors.DUPLICATES_LIMIT,
            "truncated": len(pairs) >= selectors.DUPLICATES_LIMIT,
            "can_merge": self.has_change_permission(request),
        }
        return TemplateResponse(request, "admin/crm/contact/merge_duplicates.html", context)

    def merge_view(self, request, first_id, second_id):
        try:
            first, second = self.get_object(request, str(first_id)), self.get_object(request, str(second_id))
        except Http404:
            # A merge submitted again, or reviewed from a stale list: the survivor, when the user may see it.
            survivors = [merge.merged_into(contact_id=pk) for pk in (first_id, second_id)]
            visible = self.get_queryset(request).filter(pk__in=[pk for pk in survivors if pk]).first()
            if visible is None:
                raise
            self.message_user(request, f"Nothing to do: already merged into #{visible.pk}.", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:crm_contact_change", args=[visible.pk]))
        if not (self.has_change_permission(request, first) and self.has_change_permission(request, second)):
            raise PermissionDenied
        try:
            plan = merge.merge_plan(first=first, second=second)
        except merge.MergeRefused as exc:
            return self._merge_page(request, plan=None, form=None, refused=str(exc), status=409)
        form = ContactMergeForm(request.POST or None, plan=plan)
        if request.method == "POST":
            if not form.is_valid():
                return self._merge_page(request, plan=plan, form=form, refused="The form was incomplete.", status=400)
            data = form.cleaned_data
            seen = {plan.survivor.pk: data["survivor_seen"], plan.other.pk: data["other_seen"]}
            try:
                result = merge.contacts_merge(
                    first_id=first.pk, second_id=second.pk, picks=form.picks(), actor=request.user, seen=seen
                )
            except merge.MergeRefused as exc:
                self.message_user(request, f"Nothing was merged: {exc}", messages.ERROR)
                return HttpResponseRedirect(reverse("admin:crm_contact_duplicates"))
            done = f"Merged contact #{result.merged_id} into #{result.survivor_id}; moved {_rows_text(result.moved)}."
            if result.cancelled_task_ids:
                done += f" Cancelled {len(result.cancelled_task_ids)} duplicate pending task(s)."
            self.message_user(request, done, messages.SUCCESS)
            return HttpResponseRedirect(reverse("admin:crm_contact_change", args=[result.survivor_id]))
        return self._merge_page(request, plan=plan, form=form)

    def _merge_page(self, request, *, plan, form, refused="", status=200):
        context = {
            **self.admin_site.each_context(request),
            "title": "Merge contacts",
            "opts": Contact._meta,
            "plan": plan,
            "form": form,
            "refused": refused,
            "moves": _rows_text(merge.rows_to_move(plan.other)) if plan else "",
            "pending_clash": merge.pending_task_clash(plan.survivor, plan.other) if plan else False,
        }
        return TemplateResponse(request, "admin/crm/contact/merge_preview.html", context, status=status)

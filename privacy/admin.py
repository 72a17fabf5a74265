"""The data-subject requests in admin: the audit list, and the page that exports or erases a person.

A request spans every store (a person's rows may be at several), so it takes the permission to add a
subject request and the one to see every store, or superuser status. The person is named in the POST body
only, never in a URL, so no access log or history holds them.
"""

import json

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from foundation.admin_actions import ReadOnlyAdminMixin
from privacy import services
from privacy.models import SubjectRequest
from privacy.selectors import SubjectInvalid, subject_find, subject_named
from stores.scoping import sees_every_store


class SubjectForm(forms.Form):
    email = forms.CharField(max_length=254, required=False, help_text="Any case.")
    phone = forms.CharField(
        max_length=32, required=False, help_text="With its +country code outside the default region."
    )

    def clean(self):
        try:
            self.subject = subject_named(email=self.cleaned_data["email"], phone=self.cleaned_data["phone"])
        except SubjectInvalid as invalid:
            for name, message in invalid.fields.items():
                self.add_error(name, message)
        return self.cleaned_data


@admin.register(SubjectRequest)
class SubjectRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("requested_at", "kind", "actor", "finished_at", "rows_total")
    list_filter = ("kind",)
    search_fields = ("actor",)
    fields = ("kind", "actor", "requested_at", "finished_at", "rows_table")
    readonly_fields = fields
    change_list_template = "admin/privacy/subjectrequest/change_list.html"

    @admin.display(description="rows")
    def rows_total(self, obj):
        return sum(obj.rows.values())

    @admin.display(description="rows per table")
    def rows_table(self, obj):
        return ", ".join(f"{table}: {rows}" for table, rows in obj.rows.items()) or "none"

    def has_request_permission(self, request) -> bool:
        user = request.user
        return user.has_perm("privacy.add_subjectrequest") and sees_every_store(user)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "can_request": self.has_request_permission(request)}
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        page = self.admin_site.admin_view(self.request_view)
        return [path("request/", page, name="privacy_subjectrequest_request")] + super().get_urls()

    def request_view(self, request):
        """GET: the form. POST: `preview` (what is held), `export` (the JSON download) or `erase`."""
        if not self.has_request_permission(request):
            raise PermissionDenied
        form = SubjectForm(request.POST if request.method == "POST" else None)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form,
                   "title": "Export or erase a person's data"}  # fmt: skip
        if request.method != "POST" or not form.is_valid():
            return TemplateResponse(request, "admin/privacy/subjectrequest/request.html", context)
        actor = request.user.get_username()
        action = request.POST.get("action")
        if action == "export":
            document, audit = services.subject_export(subject=form.subject, actor=actor)
            response = HttpResponse(
                json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2),
                content_type="application/json; charset=utf-8",
            )
            response["Content-Disposition"] = f'attachment; filename="subject-request-{audit.pk}.json"'
            return response
        if action == "erase" and request.POST.get("confirmed") == "yes":
            erasure = services.subject_erase(subject=form.subject, actor=actor)
            context.update(erased=erasure.rows, held_elsewhere=erasure.held_elsewhere, audit=erasure.request)
            return TemplateResponse(request, "admin/privacy/subjectrequest/request.html", context)
        with transaction.atomic():
            found = subject_find(form.subject)
        context.update(found=found.counts(), held_elsewhere=found.held_elsewhere(), subject=found.subject)
        return TemplateResponse(request, "admin/privacy/subjectrequest/request.html", context)

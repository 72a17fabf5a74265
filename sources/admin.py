"""The sources admin (Operations): each source with its URL, write-only secrets and a preview of its
mapping; the request log with bodies masked, and the replay of a request once its mapping is fixed. Both
are store-scoped like every store row."""

import json
import re

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from foundation.admin_actions import ReadOnlyAdminMixin
from foundation.admin_forms import AdminModelForm
from foundation.pagination import CappedCountPaginator
from leadgen import intake
from sources import platforms, selectors, services
from sources.models import InboundRequest, InboundSource
from stores.scoping import StoreListFilter, StoreScopedAdminMixin, store_scope

MASK = "•••"
# Keys whose values say what something is, not who someone is: shown as sent in a masked body.
_KEPT_KEY = re.compile(r"(?:^|[_.-])(?:id|ref|type)$")
_KEPT_CAMEL_KEY = re.compile(r"[a-z0-9](?:Id|ID|Ref|Type)$")
SECRET_FIELDS = {
    "secret": "Secret",
    "verify_token": "Verify token",
    "access_token": "Page access token",
}
# The secrets each kind uses (the others stay unset).
KIND_SECRETS = {InboundSource.Kind.FACEBOOK: ("secret", "verify_token", "access_token")}


def masked(value, key: str = ""):
    """A JSON document with every text and number masked, except under keys naming ids, refs and types."""
    if isinstance(value, dict):
        return {name: masked(item, str(name)) for name, item in value.items()}
    if isinstance(value, list):
        return [masked(item, key) for item in value]
    if isinstance(value, bool) or value is None or value == "":
        return value
    if _KEPT_KEY.search(key.lower()) or _KEPT_CAMEL_KEY.search(key):
        return value
    return MASK


def masked_block(text: str) -> str:
    try:
        document = json.loads(text)
    except ValueError:
        return f"(not JSON: {len(text)} characters, not shown)" if text else "—"
    return _json_block(masked(document))


def _json_block(value) -> str:
    return format_html('<pre style="white-space: pre-wrap">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False))


def _secret_field(name: str) -> forms.CharField:
    stored = InboundSource._meta.get_field(name)
    return forms.CharField(
        required=False,
        max_length=stored.max_length,
        widget=forms.PasswordInput(render_value=False),
        help_text=f"{stored.help_text} Blank keeps the stored value.",
    )


class InboundSourceForm(AdminModelForm):
    """Secrets are write-only: never rendered back, and a blank field keeps the stored value."""

    secret = _secret_field("secret")
    verify_token = _secret_field("verify_token")
    access_token = _secret_field("access_token")

    class Meta:
        model = InboundSource
        fields = "__all__"

    def _clean_secret(self, name: str) -> str:
        return self.cleaned_data.get(name) or getattr(self.instance, name)

    def clean_secret(self):
        return self._clean_secret("secret")

    def clean_verify_token(self):
        return self._clean_secret("verify_token")

    def clean_access_token(self):
        return self._clean_secret("access_token")

    def clean(self):
        cleaned = super().clean()
        kind = cleaned.get("kind")
        if kind:
            for message in platforms.secret_errors(kind, cleaned.get("secret", "")):
                self.add_error("secret", message)
            for name, problems in platforms.mapping_errors(kind, cleaned.get("field_mapping") or {}).items():
                self.add_error("field_mapping", [f"{name}: {problem}" for problem in problems])
        return cleaned


@admin.register(InboundSource)
class InboundSourceAdmin(StoreScopedAdminMixin, admin.ModelAdmin):
    form = InboundSourceForm
    list_display = ("name", "kind", "store", "is_active", "send_confirmation", "secrets_set", "last_request")
    list_filter = ("kind", "is_active", ("store", StoreListFilter))
    search_fields = ("name",)
    list_select_related = ("store",)
    readonly_fields = ("webhook_url", "secrets_status", "mapping_preview", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "kind", "store", "is_active", "webhook_url")}),
        ("Leads", {"fields": ("send_confirmation", "default_service_type", "field_mapping", "mapping_preview")}),
        ("Secrets (write-only)", {"fields": ("secrets_status", "secret", "verify_token", "access_token")}),
        (None, {"fields": ("created_at", "updated_at")}),
    )

    def has_delete_permission(self, request, obj=None):
        # Deactivate instead: its log and its leads' dedup rows hang on it, and each web process keeps an active
        # source for a few seconds (sources.selectors), which a deleted row would outlive.
        return False

    @admin.display(description="webhook URL")
    def webhook_url(self, obj):
        if obj.pk is None:
            return "Shown once the source is saved."
        return settings.SITE_URL.rstrip("/") + reverse("sources-webhook", args=[obj.public_id])

    @admin.display(description="secrets set", boolean=True)
    def secrets_set(self, obj):
        return all(getattr(obj, name) for name in KIND_SECRETS.get(obj.kind, ("secret",)))

    @admin.display(description="secrets")
    def secrets_status(self, obj):
        used = KIND_SECRETS.get(obj.kind, ("secret",)) if obj.pk else tuple(SECRET_FIELDS)
        return format_html_join(
            "",
            "<div>{}: {}</div>",
            ((SECRET_FIELDS[name], "set" if getattr(obj, name) else "not set") for name in used),
        )

    @admin.display(description="last request")
    def last_request(self, obj):
        logged = obj.requests.order_by("-received_at", "-pk").only("received_at", "outcome").first()
        return f"{logged.get_outcome_display()} ({logged.received_at:%Y-%m-%d %H:%M})" if logged else "—"

    @admin.display(description="mapping preview (on the last request that held a lead; values masked)")
    def mapping_preview(self, obj):
        if obj.pk is None:
            return "Shown once the source has received a lead."
        logged = selectors.source_last_payload(source=obj)
        if logged is None:
            return "No request with a lead received yet."
        try:
            submission = _preview_submission(obj, logged)
        except platforms.PayloadUnreadable as unreadable:
            return _errors_list(unreadable.fields or {"body": [unreadable.message]})
        if submission is None:
            return "No request with a lead received yet."
        try:
            fields = platforms.mapped_fields(obj.kind, submission, obj.field_mapping)
        except platforms.PayloadUnreadable as unreadable:
            return _errors_list(unreadable.fields)
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td></tr>",
            (
                (name, _masked_value(fields.get(name, ""), required=name in intake.received_required_fields()))
                for name in platforms.LEAD_FIELDS
            ),
        )
        sent = (
            format_html("<p>The platform's field keys: {}</p>", ", ".join(submission.answers) or "none")
            if obj.kind != InboundSource.Kind.GENERIC
            else format_html("<p>The document the expressions read:</p>{}", _json_block(masked(submission.document)))
        )
        received = format_html(
            '<p>From the request of {} (<a href="{}">in the log</a>).</p>',
            f"{logged.received_at:%Y-%m-%d %H:%M}",
            reverse("admin:sources_inboundrequest_change", args=[logged.pk]),
        )
        return format_html("{}<table><tr><th>lead field</th><th>value</th></tr>{}</table>{}", received, rows, sent)


def _preview_submission(source, logged):
    if source.kind == InboundSource.Kind.FACEBOOK:
        return platforms.facebook_lead_submission(next(iter(logged.fetched.values())))
    found = platforms.submissions(source.kind, body=logged.body.encode(), headers=logged.headers)
    return found[0] if found else None


def _masked_value(value: str, *, required: bool) -> str:
    if value:
        return f"{MASK} ({len(value)} characters)"
    return "missing: the lead is refused without it" if required else "—"


def _errors_list(errors: dict) -> str:
    return format_html(
        "<ul>{}</ul>",
        format_html_join("", "<li>{}: {}</li>", ((name, " ".join(map(str, texts))) for name, texts in errors.items())),
    )


class SourceListFilter(admin.RelatedFieldListFilter):
    """The source filter, offering only the sources of the user's stores."""

    def field_choices(self, field, request, model_admin):
        return [(source.pk, str(source)) for source in store_scope(InboundSource.objects.all(), request.user)]


@admin.register(InboundRequest)
class InboundRequestAdmin(StoreScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The request log: every request each source received, its body masked, and the replay of a failed one."""

    list_display = ("received_at", "source", "outcome", "signature_ok", "platform_id", "lead_link")
    list_filter = ("outcome", "signature_ok", ("source", SourceListFilter), ("store", StoreListFilter), "received_at")
    search_fields = ("=platform_id",)
    date_hierarchy = "received_at"
    ordering = ("-received_at", "-pk")
    paginator = CappedCountPaginator
    show_full_result_count = False
    list_select_related = ("source",)
    actions = ["replay"]
    fields = (
        "source", "store", "received_at", "signature_ok", "outcome", "errors_display", "platform_id", "lead_link",
        "results_display", "headers_display", "body_masked", "fetched_masked",
    )  # fmt: skip
    readonly_fields = fields

    @admin.display(description="lead")
    def lead_link(self, obj):
        if obj.lead_id is None:
            return "—"
        return format_html(
            '<a href="{}">Lead #{}</a>', reverse("admin:leadgen_lead_change", args=[obj.lead_id]), obj.lead_id
        )

    @admin.display(description="errors")
    def errors_display(self, obj):
        return _errors_list(obj.errors) if obj.errors else "—"

    @admin.display(description="each lead")
    def results_display(self, obj):
        rows = (
            (platform_id, result["outcome"], result.get("lead", ""), json.dumps(result.get("errors", {})))
            for platform_id, result in obj.results.items()
        )
        table = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows)
        return format_html(
            "<table><tr><th>platform id</th><th>outcome</th><th>lead</th><th>errors</th></tr>{}</table>", table
        ) if obj.results else "—"  # fmt: skip

    @admin.display(description="headers")
    def headers_display(self, obj):
        return _json_block(obj.headers) if obj.headers else "—"

    @admin.display(description="body (masked)")
    def body_masked(self, obj):
        if not obj.signature_ok:
            return "Not kept: the signature did not hold."
        return masked_block(obj.body)

    @admin.display(description="fetched from the platform (masked)")
    def fetched_masked(self, obj):
        return _json_block(masked(obj.fetched)) if obj.fetched else "—"

    def has_replay_permission(self, request):
        return request.user.has_perm("sources.replay_inboundrequest")

    @admin.action(description="Replay (after fixing the source's mapping)", permissions=["replay"])
    def replay(self, request, queryset):
        actor = request.user.get_username()
        replayed = [
            logged
            for logged in queryset.select_related("source")
            if services.request_replay(request=logged, actor=actor)
        ]
        outcomes = ", ".join(
            f"{logged.platform_id or logged.pk}: {logged.get_outcome_display()}" for logged in replayed
        )
        level = messages.SUCCESS if replayed else messages.WARNING
        self.message_user(
            request,
            f"Replayed {len(replayed)} request(s){': ' + outcomes if outcomes else ''}. Only signed requests that "
            "were unreadable, invalid or failed are replayed.",
            level,
        )

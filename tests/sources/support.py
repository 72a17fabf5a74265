"""What the sources' webhook and admin tests share: each kind's secrets, the stand-ins' requests signed with
them, posting to a source's URL, running jobs, and the admin's source form and replay action."""

import json

from django.urls import reverse
from django.utils import timezone

import jobs
from jobs.models import Job
from standins import platforms as standin

SECRETS = {
    "facebook": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "google_ads": "form-key-7c1d",
    "typeform": "typeform-signing-secret",
    "webflow": "3f6a9c0e2b4d6f8a1c3e5a7b9d1f3a5c",
    "generic": standin.standard_webhooks_secret(),
}
VERIFY_TOKEN = "verify-me-4f2a"
CHANNELS = {"facebook": "facebook", "google_ads": "google_ads", "typeform": "typeform", "webflow": "webflow",
            "generic": "webhook"}  # fmt: skip


def signed(kind, *, secret=None, **options) -> standin.PlatformRequest:
    """The stand-in's request for `kind`, signed as the platform signs with the source's secret (or `secret`)."""
    secret = SECRETS[kind] if secret is None else secret
    if kind == "facebook":
        return standin.facebook_leadgen(app_secret=secret, **options)
    if kind == "google_ads":
        return standin.google_ads_lead(google_key=secret, **options)
    if kind == "typeform":
        return standin.typeform_response(secret=secret, **options)
    if kind == "webflow":
        return standin.webflow_form_submission(secret=secret, **options)
    return standin.generic_webhook(secret=secret, **options)


def post(client, source, request: standin.PlatformRequest, *, drop=()):
    """POST the platform's request to the source's URL as the platform would, less the headers in `drop`."""
    headers = {name: value for name, value in request.headers.items() if name.lower() not in {*drop, "content-type"}}
    return client.post(
        webhook_url(source),
        data=request.body,
        content_type=request.headers.get("Content-Type", "application/json"),
        headers=headers,
    )


def webhook_url(source) -> str:
    return reverse("sources-webhook", args=[source.public_id])


def run_jobs(kind=None) -> int:
    """Run every pending job (of `kind`) as a worker would, ignoring delays; returns how many runs happened."""
    runs = 0
    pending = Job.objects.filter(status=Job.Status.PENDING).order_by("pk")
    if kind:
        pending = pending.filter(kind=kind)
    for job in list(pending):
        Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
        runs += jobs.run_now(job.pk)
    return runs


def source_form(source, **overrides) -> dict:
    """The source's admin change form as a browser posts it unchanged (secrets blank: kept), with `overrides`."""
    data = {
        "name": source.name, "kind": source.kind, "store": source.store_id or "",
        "default_service_type": source.default_service_type, "field_mapping": json.dumps(source.field_mapping),
        "secret": "", "verify_token": "", "access_token": "",
    }  # fmt: skip
    if source.is_active:
        data["is_active"] = "on"
    if source.send_confirmation:
        data["send_confirmation"] = "on"
    return {**data, **overrides}


def replay(client, *logged):
    """The request log's Replay action on these rows, as a staff user's browser sends it."""
    return client.post(
        reverse("admin:sources_inboundrequest_changelist"),
        {"action": "replay", "_selected_action": [str(row.pk) for row in logged]},
    )

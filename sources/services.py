"""Writes of inbound lead sources: a platform's request checked, logged and turned into leads (Facebook's
into jobs that fetch them), a logged request replayed, and the request log's retention.

A request's leads are mapped, checked and classified before any database work; then one transaction writes
the leads, their jobs, the request's row (once, with its outcome) and the leads' dedup rows (InboundLead,
unique per source and platform id), so a platform's retry, even one arriving at the same moment, makes no
second lead: its dedup row is refused, its transaction rolled back, and it is answered with the first lead.
The platform is answered only once that transaction has committed: a request whose processing breaks is
logged as failed (kept, to replay) and answered 500, and one whose process dies on the way was answered
nothing; either way the platform sends it again.
"""

import json
import time
from collections.abc import Mapping
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

import jobs
from foundation.db import storable_text
from integrations.facebook import client as facebook
from leadgen import intake
from leadgen import selectors as lead_selectors
from sources import platforms
from sources.models import InboundLead, InboundRequest, InboundSource

logger = structlog.get_logger(__name__)

Outcome = InboundRequest.Outcome
FETCH_KIND = "sources.facebook_fetch"
RETENTION_KIND = "sources.retention"
RETENTION_BATCH = 1000
# The lead's channel for each kind of source.
CHANNELS = {
    "facebook": "facebook", "google_ads": "google_ads", "typeform": "typeform", "webflow": "webflow",
    "generic": "webhook",
}  # fmt: skip
# The headers the log keeps: what says who sent it and how it was signed. Signatures are digests, not secrets.
KEPT_HEADERS = (
    "content-type", "user-agent", "x-hub-signature-256", "typeform-signature", "x-webflow-timestamp",
    "x-webflow-signature", "webhook-id", "webhook-timestamp", "webhook-signature",
)  # fmt: skip
KEPT_HEADER_CHARS = 500
# A request's outcome is its most telling lead's: what needs a person first.
OUTCOME_ORDER = (
    Outcome.FAILED, Outcome.INVALID, Outcome.UNREADABLE, Outcome.PENDING_FETCH, Outcome.CREATED, Outcome.TEST,
    Outcome.DUPLICATE,
)  # fmt: skip
DONE = (Outcome.CREATED, Outcome.TEST, Outcome.DUPLICATE)
REPLAYABLE = (Outcome.UNREADABLE, Outcome.INVALID, Outcome.FAILED)


def request_receive(*, source: InboundSource, headers: Mapping[str, str], body: bytes) -> InboundRequest:
    """Check a request's signature, log it, and turn it into leads (Facebook's: into fetch jobs).

    A refused signature is logged as a fact only (no headers, no body) and raises platforms.SignatureRefused.
    """
    try:
        platforms.verify(source.kind, secrets=source.secrets, headers=headers, body=body, now=time.time())
    except platforms.SignatureRefused as refused:
        InboundRequest.objects.create(
            source=source,
            store_id=source.store_id,
            outcome=Outcome.REFUSED_SIGNATURE,
            errors={"signature": [str(refused)]},
        )
        logger.info("source_request_refused", source_id=source.pk, kind=source.kind)
        raise
    request = InboundRequest(
        source=source,
        store_id=source.store_id,
        headers=_kept_headers(headers),
        body=platforms.loggable_body(source.kind, body),
        signature_ok=True,
    )
    try:
        _request_process(request, source=source, body=body, headers=headers)
    except Exception:
        _request_failed(request)
        raise
    logger.info("source_request_received", source_id=source.pk, request_id=request.pk, outcome=request.outcome)
    return request


def request_replay(*, request: InboundRequest, actor: str) -> bool:
    """Run a logged request that failed through the pipeline again, on its stored body (its signature held
    when it arrived). Its leads already made stay as they are, and the dedup keeps each lead once.
    Returns whether it was replayed: only signed requests that were unreadable, invalid or failed are."""
    if not request.signature_ok or request.outcome not in REPLAYABLE:
        return False
    _request_process(request, source=request.source, body=request.body.encode(), headers=request.headers, actor=actor)
    logger.info("source_request_replayed", request_id=request.pk, outcome=request.outcome, actor=actor)
    return True


def _kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    lowered = {name.lower(): value for name, value in headers.items()}
    return {name: storable_text(lowered[name])[:KEPT_HEADER_CHARS] for name in KEPT_HEADERS if lowered.get(name)}


def _request_failed(request: InboundRequest) -> None:
    """A new request whose processing broke, logged as failed in a transaction of its own: kept, to replay."""
    if request.pk is not None and InboundRequest.objects.filter(pk=request.pk).exists():
        return  # what broke came after its transaction committed
    request.pk, request.results, request.lead = None, {}, None
    request.outcome, request.errors = Outcome.FAILED, {"request": ["Its processing did not finish."]}
    request.save()


def _request_process(request, *, source, body: bytes, headers: Mapping[str, str], actor: str | None = None) -> None:
    """A new request (not saved yet) or a replayed one: its leads made, its row written with the outcome."""
    try:
        found = platforms.submissions(source.kind, body=body, headers=headers)
    except platforms.PayloadUnreadable as unreadable:
        request.outcome, request.errors = Outcome.UNREADABLE, unreadable.fields or {"body": [unreadable.message]}
        request.save(update_fields=None if request.pk is None else ["outcome", "errors"])
        return
    # Before any database work, so that no transaction is open and no pooled connection held while the
    # classifier answers. A replay redoes only what failed.
    checked = {
        submission.platform_id: _lead_check(source, submission)
        for submission in found
        if not submission.fetch and not _done(request.results.get(submission.platform_id))
    }
    try:
        _request_write(request, source, found, checked, actor=actor, find_first=False)
    except IntegrityError:
        # A lead of it is made already (a platform's retry, maybe one that ran alongside): its dedup row was
        # refused and everything rolled back. Again, looking each lead up first.
        _request_write(request, source, found, checked, actor=actor, find_first=True)


def _done(result: dict | None) -> bool:
    return bool(result) and result["outcome"] in DONE


def _request_write(request, source, found, checked, *, actor: str | None, find_first: bool) -> None:
    """One transaction, without savepoints: the leads and their jobs, the request's row with its outcome, the
    leads' dedup rows, the fetch jobs. A lead made already fails its dedup row's INSERT (IntegrityError),
    unless `find_first` looks each one up before making it; the request is then as it was."""
    pk, results_before = request.pk, request.results
    try:
        # A fetch job queued here runs once the results naming it are saved, so its own result (written under
        # the row's lock) is never overwritten by them.
        with transaction.atomic():
            if actor is not None:  # a replay: a fetch job of this request may be writing its result right now
                request.results = (
                    InboundRequest.objects.select_for_update().values_list("results", flat=True).get(pk=request.pk)
                )
            results, made, fetches = {}, {}, []
            for submission in found:
                platform_id = submission.platform_id
                if _done(done := request.results.get(platform_id)):
                    results[platform_id] = done
                elif (submission.fetch or find_first) and (known := _known(source, platform_id)):
                    results[platform_id] = {"outcome": Outcome.DUPLICATE, **known}
                elif submission.fetch:
                    results[platform_id] = {"outcome": Outcome.PENDING_FETCH}
                    fetches.append(submission)
                else:
                    received, result = checked[platform_id]
                    if received is not None:
                        made[platform_id] = lead = _lead_write(source, submission, received)
                        result = _made(lead, left_out=result)
                    results[platform_id] = result
            request.results = results
            _request_summarize(request)
            request.save(update_fields=None if pk is None else ["results", "outcome", "errors", "platform_id", "lead"])
            InboundLead.objects.bulk_create(
                InboundLead(source=source, platform_id=platform_id, lead=lead, request=request)
                for platform_id, lead in made.items()
            )
            for submission in fetches:
                _fetch_queue(source, request, submission, actor=actor)
    except IntegrityError:
        request.pk, request.results = pk, results_before  # a row written by it was rolled back with it
        raise


def _request_summarize(request: InboundRequest) -> None:
    """The request's outcome, errors, platform id and lead from its leads' results."""
    results = list(request.results.values())
    outcomes = {result["outcome"] for result in results}
    request.outcome = next((outcome for outcome in OUTCOME_ORDER if outcome in outcomes), Outcome.IGNORED)
    ranked = sorted(results, key=lambda result: OUTCOME_ORDER.index(result["outcome"]))
    request.errors = next((result["errors"] for result in ranked if result.get("errors")), {})
    request.platform_id = next(iter(request.results), "")
    request.lead_id = next((result["lead_id"] for result in results if result.get("lead_id")), None)


def _known(source, platform_id: str) -> dict | None:
    row = InboundLead.objects.filter(source=source, platform_id=platform_id).values("lead_id", "lead__public_id")
    row = row.first()
    return {"lead_id": row["lead_id"], "lead": str(row["lead__public_id"])} if row else None


def _lead_check(source, submission) -> tuple[intake.ReceivedLead | None, dict]:
    """The lead mapped, checked and classified, and the fields left out of it; or None and its result
    (unreadable, invalid). The person is gone by now and cannot correct a field, so an optional one that fails
    the web form's check is left out (and recorded); without a valid first name and email there is no lead."""
    try:
        fields = _lead_fields(source, submission)
    except platforms.PayloadUnreadable as unreadable:
        return None, {"outcome": Outcome.UNREADABLE, "errors": unreadable.fields or {"body": [unreadable.message]}}
    left_out = {}
    try:
        return intake.lead_receive_check(fields=fields), left_out
    except intake.LeadInvalid as invalid:
        if set(invalid.fields) & intake.received_required_fields():
            return None, {"outcome": Outcome.INVALID, "errors": invalid.fields}
        left_out = invalid.fields
    kept = {name: value for name, value in fields.items() if name not in left_out}
    try:
        return intake.lead_receive_check(fields=kept), left_out
    except intake.LeadInvalid as invalid:
        return None, {"outcome": Outcome.INVALID, "errors": invalid.fields}


def _lead_write(source, submission, received):
    return intake.lead_receive_save(
        received=received,
        channel=CHANNELS[source.kind],
        store_id=source.store_id,
        is_test=submission.is_test,
        send_confirmation=source.send_confirmation,
    )


def _made(lead, *, left_out: dict) -> dict:
    made = {
        "outcome": Outcome.TEST if lead.is_test else Outcome.CREATED,
        "lead_id": lead.pk,
        "lead": str(lead.public_id),
    }
    return {**made, "errors": left_out} if left_out else made


def _lead_make(source, request, submission) -> dict:
    """A lead fetched from its platform made, with its dedup row; its result for its request's results."""
    received, result = _lead_check(source, submission)
    if received is None:
        return result
    try:
        with transaction.atomic():
            lead = _lead_write(source, submission, received)
            InboundLead.objects.create(source=source, platform_id=submission.platform_id, lead=lead, request=request)
    except IntegrityError:
        # The same lead, made by another run alongside this one: its dedup row refused this one's.
        if known := _known(source, submission.platform_id):
            return {"outcome": Outcome.DUPLICATE, **known}
        raise
    return _made(lead, left_out=result)


def _lead_fields(source, submission) -> dict:
    """The lead's fields: the mapped ones, the source's service type by default, the form's other answers as
    its steps, the campaign and form as its UTM campaign and content."""
    fields = platforms.mapped_fields(source.kind, submission, source.field_mapping)
    service_type = _service_type(fields.get("service_type", "")) or source.default_service_type
    if service_type:
        fields["service_type"] = service_type
    used = _mapped_keys(source)
    others = {name: text for name, text in submission.answers.items() if name.casefold() not in used and text}
    if others:
        fields["steps"] = intake.received_steps(others)
    context = submission.context
    utm = {"campaign": context.get("campaign_id"), "content": context.get("form_id") or context.get("formId")}
    if utm := {name: value for name, value in utm.items() if value}:
        fields["utm"] = utm
    return fields


def _service_type(value: str) -> str:
    """A service type given as its value or its label (what a form's choice shows people), as its value."""
    wanted = value.strip().casefold()
    for service_type, label in lead_selectors.service_type_choices():
        if wanted in (service_type, str(label).casefold()):
            return service_type
    return value


def _mapped_keys(source) -> set[str]:
    """The platform keys the source's mapping reads (casefolded): answers the lead's fields hold already."""
    mapping = {**platforms.DEFAULT_MAPPINGS[source.kind], **(source.field_mapping or {})}
    keys = set()
    for where in mapping.values():
        keys.update(key.casefold() for key in ([where] if isinstance(where, str) else where) if isinstance(key, str))
    return keys


# --- Facebook: the lead fetched from the Graph API ---------------------------------------------


def fetch_key(source_id: int, leadgen_id: str) -> str:
    return f"{FETCH_KIND}:{source_id}:{leadgen_id}"


def _fetch_queue(source, request, submission, *, actor: str | None) -> None:
    payload = {
        "source_id": source.pk,
        "request_id": request.pk,
        "leadgen_id": submission.platform_id,
        "context": submission.context,  # form, page and ad ids: nothing of the person
    }
    key = fetch_key(source.pk, submission.platform_id)
    if actor is None:
        jobs.enqueue(FETCH_KIND, payload, key=key, store_id=source.store_id)
    else:  # a replay: the fetch that died runs again
        jobs.replay_or_enqueue(FETCH_KIND, payload, key=key, actor=actor, store_id=source.store_id)


def facebook_lead_fetch(*, job) -> None:
    """Read the lead a leadgen notification announced from the Graph API, then make it as any other.

    Graph failures are the job layer's to retry; the request's row says how the fetch stands. A lead the
    mapping cannot read, or whose fields are invalid, is a permanent failure: the job is dead (and alerted)
    until the mapping is fixed and the request replayed.
    """
    payload = job.payload
    source = InboundSource.objects.filter(pk=payload["source_id"]).first()
    if source is None:
        raise jobs.PermanentError("the source no longer exists")
    leadgen_id, request_id = payload["leadgen_id"], payload["request_id"]
    if _known(source, leadgen_id):
        return  # made by an earlier run, or by another notification of the same lead
    try:
        graph_lead = facebook.client_from_settings(source.access_token, app_secret=source.secret).lead(leadgen_id)
        submission = platforms.facebook_lead_submission(graph_lead, context=payload.get("context"))
    except (jobs.TransientError, jobs.PermanentError) as exc:
        last = isinstance(exc, jobs.PermanentError) or job.attempts >= job.max_attempts
        result = {"outcome": Outcome.FAILED if last else Outcome.PENDING_FETCH, "errors": {"fetch": [str(exc)]}}
        _fetch_result(request_id, leadgen_id, result)
        raise
    except platforms.PayloadUnreadable as unreadable:
        _fetch_result(request_id, leadgen_id, {"outcome": Outcome.UNREADABLE, "errors": unreadable.fields})
        raise jobs.PermanentError("the Graph API's lead is not in the shape of a lead") from unreadable
    request = InboundRequest.objects.filter(pk=request_id).first()
    result = _lead_make(source, request, submission)
    _fetch_result(request_id, leadgen_id, result, fetched=graph_lead)
    if result["outcome"] in (Outcome.UNREADABLE, Outcome.INVALID):
        raise jobs.PermanentError("the mapping cannot make a valid lead of it: see the source's request log")


def _fetch_result(request_id: int, leadgen_id: str, result: dict, *, fetched: dict | None = None) -> None:
    """One fetched lead's result into its request's row (the row may be gone with the log's retention)."""
    with transaction.atomic():
        request = InboundRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            return
        request.results[leadgen_id] = result
        if fetched is not None:
            request.fetched[leadgen_id] = fetched
        _request_summarize(request)
        request.save(update_fields=["results", "fetched", "outcome", "errors", "platform_id", "lead"])


# --- retention -----------------------------------------------------------------------------------


def requests_retention_start() -> None:
    """Queue a pass over the request log; triggers within the same hour share one job."""
    jobs.enqueue(RETENTION_KIND, {"part": 1}, key=f"{RETENTION_KIND}:{timezone.now():%Y-%m-%dT%H}")


def requests_retention_run(*, job_key: str, part: int) -> int:
    """Delete one batch of log rows older than SOURCES_REQUEST_LOG_DAYS, oldest first; a full batch queues
    the next part. The leads they made stay."""
    cutoff = timezone.now() - timedelta(days=settings.SOURCES_REQUEST_LOG_DAYS)
    ids = list(
        InboundRequest.objects.filter(received_at__lt=cutoff)
        .order_by("received_at")
        .values_list("pk", flat=True)[:RETENTION_BATCH]
    )
    with transaction.atomic():
        InboundLead.objects.filter(request_id__in=ids).update(request=None)
        deleted = InboundRequest.objects.filter(pk__in=ids)._raw_delete(InboundRequest.objects.db)
    if len(ids) == RETENTION_BATCH:
        jobs.enqueue(RETENTION_KIND, {"part": part + 1}, key=f"{job_key.split('#', 1)[0]}#{part + 1}")
    logger.info("sources_retention_done", deleted=deleted, part=part)
    return deleted


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_erase(*, lead_ids, request_ids, texts) -> dict[str, int]:
    """Drop the person from the request log: the leads' platform ids are deleted; each logged request keeps
    its fact (when, which source, outcome) and loses its body when the body names one of `texts` or every
    lead it made is theirs, and each lead fetched from the platform that is theirs. A body is one platform
    document: it is cleared whole, never edited. {model label: rows deleted or cleared}."""
    lead_ids = set(lead_ids)
    counts = dict(InboundLead.objects.filter(lead__in=lead_ids).delete()[1])
    cleared = []
    for request in InboundRequest.objects.select_for_update().filter(pk__in=request_ids).order_by("pk"):
        theirs = {pid for pid, result in request.results.items() if result.get("lead_id") in lead_ids}
        made = {pid for pid, result in request.results.items() if result.get("lead_id")}
        fetched = {
            pid: lead
            for pid, lead in request.fetched.items()
            if pid not in theirs and not _names(json.dumps(lead, ensure_ascii=False), texts)
        }
        body = "" if _names(request.body, texts) or (made and made <= theirs) else request.body
        if (body, fetched) != (request.body, request.fetched):
            request.body, request.fetched = body, fetched
            cleared.append(request)
    InboundRequest.objects.bulk_update(cleared, ["body", "fetched"])
    counts[InboundRequest._meta.label] = len(cleared)
    return counts


def _names(text: str, texts) -> bool:
    folded = text.casefold()
    return any(name.casefold() in folded for name in texts)

"""The admin index's dashboard: reads the chosen period and store, asks backoffice.dashboard, links each figure."""

from urllib.parse import urlencode

from django import template
from django.urls import reverse

from backoffice import dashboard
from backoffice.charts import stacked_bars_svg
from stores.scoping import sees_every_store, store_ids_for, stores_visible

register = template.Library()

PERIOD_DAYS = (7, 30, 90)
DEFAULT_DAYS = 30


def _link(name: str, **params) -> str:
    return f"{reverse(name)}?{urlencode({k: v for k, v in params.items() if v not in (None, '')})}"


def _owned_by(user_id) -> dict:
    return {"assigned_to__id__exact": user_id} if user_id is not None else {"assigned_to__isnull": "True"}


def _chosen(request):
    """The period and store asked for; a store the user may not see, or no store, means all of theirs."""
    days = int(request.GET["days"]) if request.GET.get("days") in {str(d) for d in PERIOD_DAYS} else DEFAULT_DAYS
    stores = list(stores_visible(request.user).only("pk", "franchise", "name"))
    store = next((s for s in stores if str(s.pk) == request.GET.get("store")), None)
    scope = store_ids_for(request.user)
    store_ids = frozenset([store.pk]) if store else scope
    return days, stores, store, store_ids


@register.inclusion_tag("admin/backoffice/dashboard.html", takes_context=True)
def backoffice_dashboard(context):
    request = context["request"]
    user = request.user
    days, stores, store, store_ids = _chosen(request)
    period = dashboard.Period.last_days(days)
    store_param = store.pk if store else None
    since, until = period.start.isoformat(), period.end.isoformat()
    out = {
        "period_days": PERIOD_DAYS, "days": days, "stores": stores, "store": store, "period": period,
        "queue_mine": reverse("admin:crm_task_queue") + "?view=mine",
        "queue_due_soon": reverse("admin:crm_task_queue") + "?view=due_soon",
    }  # fmt: skip
    sections = {
        section for section, permission in
        (("leads", "leadgen.view_lead"), ("prototypes", "prototypes.view_prototype"),
         ("chats", "chat.view_chatsession"), ("first_response", "crm.view_task"), ("delivery_health", "jobs.view_job"))
        if user.has_perm(permission)
    }  # fmt: skip
    if "first_response" in sections and (sees_every_store(user) or user.has_perm("crm.view_repprofile")):
        sections.add("reps")  # each rep's figures: for managers
    figures = dashboard.figures(period=period, store_ids=store_ids, sections=sections)
    out["computed_at"] = figures["computed_at"]
    # The prototypes list has no store filter (it shows the user's stores): linked when no one store is chosen.
    prototype_links = {"completed": None, "failed": None, "requested": None}
    if store is None:
        created = {"created_at__gte": since, "created_at__lt": until}
        prototype_links = {
            "requested": _link("admin:prototypes_prototype_changelist", **created),
            "completed": _link("admin:prototypes_prototype_changelist", **created, state__exact="completed"),
            "failed": _link("admin:prototypes_prototype_changelist", **created, state__exact="failed"),
        }
    if "daily" in figures:
        daily = figures["daily"]
        out["channel_chart"] = stacked_bars_svg(
            title="Leads per day by channel", days=daily.days, series=daily.by_channel, labels=dashboard.CHANNEL_LABELS
        )
        out["status_chart"] = stacked_bars_svg(
            title="Leads per day by classification", days=daily.days, series=daily.by_status,
            labels=dashboard.STATUS_LABELS,
        )  # fmt: skip
        leads = {"created_at__gte": since, "created_at__lt": until, "store__id__exact": store_param}
        step_filters = {
            "received": {}, "qualified": {"status__exact": "lead"}, "delivered": {"pipedrive_state__exact": "synced"},
        }  # fmt: skip
        links = {key: _link("admin:leadgen_lead_changelist", **leads, **extra) for key, extra in step_filters.items()}
        if "prototypes" in figures:
            links["prototype_completed"] = prototype_links["completed"]
        out["funnel"] = [(step, links.get(step.key)) for step in figures["funnel"]]
    if "prototypes" in figures:
        out["prototypes"] = figures["prototypes"]
        out["prototype_links"] = prototype_links
    if "chats" in figures:
        out["chats"] = figures["chats"]
    if "first_response" in figures:
        tasks = {"task_type__exact": "lead_outreach", "store__id__exact": store_param}
        due = {**tasks, "due_at__gte": since, "due_at__lt": until}
        out["sla"] = figures["first_response"]
        out["sla_links"] = {
            "due": _link("admin:crm_task_changelist", **due),
            "done": _link("admin:crm_task_changelist", **due, status__exact="done"),
            "within": _link("admin:crm_task_changelist", **due, sla="met"),
            "overdue": _link("admin:crm_task_changelist", **tasks, due="overdue"),
        }
    if "reps" in figures:
        out["show_reps"] = True
        out["reps"] = [
            (rep, _link("admin:crm_task_changelist", **due, **_owned_by(rep.user_id))) for rep in figures["reps"]
        ]
    if "delivery_health" in figures:
        health = figures["delivery_health"]
        out["health"] = health
        out["job_rows"] = [
            (
                kind,
                _link("admin:jobs_job_changelist", kind__exact=kind["kind"], status__exact="pending"),
                _link("admin:jobs_job_changelist", kind__exact=kind["kind"], status__exact="dead"),
            )
            for kind in health.jobs_by_kind
        ]
        out["mailbox_list"] = reverse("admin:tracking_mailbox_changelist")
        out["beat_list"] = reverse("admin:django_celery_beat_periodictask_changelist")
    return out


@register.filter
def duration(seconds):
    """Seconds as "4 min 10 s", "2 h 5 min" or "3 d 4 h"; "—" for none."""
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


@register.filter
def percent(share):
    return "—" if share is None else f"{share:.0%}"

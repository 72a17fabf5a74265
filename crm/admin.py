from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, F, Q
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from import_export import resources
from import_export.admin import ExportMixin
from import_export.formats.base_formats import CSV

from chat import selectors as chat_selectors
from crm import assignment, selectors, services
from crm.merge_admin import ContactMergeAdminMixin
from crm.models import AssignmentRule, Contact, RepProfile, Task, TimelineEvent
from foundation.admin_actions import ReadOnlyAdminMixin
from foundation.pagination import CappedCountPaginator
from leadgen import selectors as lead_selectors
from prototypes import selectors as prototype_selectors
from stores.models import validate_timezone
from stores.scoping import StoreListFilter, StoreScopedAdminMixin, sees_every_store, store_ids_for, stores_visible


class ContactResource(resources.ModelResource):
    class Meta:
        model = Contact
        fields = (
            "id", "email", "phone", "first_name", "last_name", "company", "store__name", "lifecycle_stage",
            "lead_status", "last_activity_at", "created_at",
        )  # fmt: skip
        export_order = fields


class TaskResource(resources.ModelResource):
    class Meta:
        model = Task
        fields = (
            "id", "contact__phone", "store__name", "task_type", "status", "priority", "due_at", "completed_at",
            "completed_by", "assigned_to__username", "action_needed_reason",
        )  # fmt: skip
        export_order = fields


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("task_type", "status", "priority", "due_at", "action_needed_reason")
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("contact")  # each row's title names its contact

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Contact)
class ContactAdmin(ContactMergeAdminMixin, StoreScopedAdminMixin, ExportMixin, admin.ModelAdmin):
    resource_classes = [ContactResource]
    export_formats = [CSV]
    list_display = (
        "email", "phone", "first_name", "last_name", "company", "store", "lifecycle_stage", "lead_status",
        "last_activity_at",
    )  # fmt: skip
    list_filter = ("lifecycle_stage", "lead_status", ("store", StoreListFilter), "last_activity_at")
    search_fields = ("=email", "=phone", "first_name", "last_name", "company")
    list_select_related = ("store",)
    ordering = ("-last_activity_at", "-pk")
    date_hierarchy = "last_activity_at"
    paginator = CappedCountPaginator
    show_full_result_count = False
    fields = (
        "email", "phone", "store", "franchise", "account_id", "lifecycle_stage", "lead_status", "first_name",
        "last_name", "company", "lead_sources", "last_activity_at", "created_at", "updated_at",
    )  # fmt: skip
    # The email, the phone and the store are the contact's identity (crm.identity matches arrivals on them; a
    # merge joins two); the rest is set by the lead processor.
    readonly_fields = (
        "email", "phone", "store", "franchise", "account_id", "lead_sources", "last_activity_at", "created_at",
        "updated_at",
    )  # fmt: skip
    inlines = [TaskInline]  # the timeline is the page's own section (templates/admin/crm/contact/change_form.html)

    @staticmethod
    def _source_leads(contact) -> list:
        """The leads behind this contact, read once per page: the lead source, the chats and the prototypes."""
        if not hasattr(contact, "_source_leads"):
            lead_ids = selectors.contact_lead_ids(contact=contact)
            contact._source_leads = list(lead_selectors.leads_by_ids(lead_ids=lead_ids, store_id=contact.store_id))
        return contact._source_leads

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        """The timeline, and the chat transcripts and the prototypes of the contact's leads, each shown to staff
        who may read it."""
        if obj is not None:
            leads = self._source_leads(obj)
            lead_ids = [lead.pk for lead in leads]
            user = request.user
            if user.has_perm("chat.view_chatsession"):
                context["chat_sessions"] = chat_selectors.chat_sessions_of_leads(lead_ids=lead_ids)
            if user.has_perm("prototypes.view_prototype"):
                context["prototypes"] = prototype_selectors.prototypes_of_leads(lead_ids=lead_ids)
            context["timeline"], context["timeline_truncated"] = selectors.contact_timeline(
                contact=obj,
                leads=leads if user.has_perm("leadgen.view_lead") else None,
                chat_sessions=context.get("chat_sessions"),
                prototypes=context.get("prototypes"),
            )
            context["timeline_limit"] = selectors.TIMELINE_LIMIT
            context["can_view_tasks"] = user.has_perm("crm.view_task")
            context["can_view_tracked_users"] = user.has_perm("docs_users.view_trackeduser")
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    @admin.display(description="lead source")
    def lead_sources(self, obj):
        """The leads behind this contact (each lead.created event names one), with channel and lead type."""
        leads = self._source_leads(obj)
        rows = [
            (
                reverse("admin:leadgen_lead_change", args=[lead.pk]), f"#{lead.pk}", lead.get_channel_display(),
                lead.lead_type or "—", f"{timezone.localtime(lead.received_at or lead.created_at):%Y-%m-%d %H:%M}",
                lead.email_recipient or lead.source_page or "—",
            )
            for lead in leads
        ]  # fmt: skip
        if not rows:
            return "—"
        return format_html(
            "<table><tr><th>lead</th><th>channel</th><th>lead type</th><th>arrived</th><th>via</th></tr>{}</table>",
            format_html_join(
                "", '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>', rows
            ),
        )

    def has_add_permission(self, request):
        return False  # contacts come from leads

    def has_export_permission(self, request):
        return self.has_view_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False


class DueFilter(admin.SimpleListFilter):
    title = "due"
    parameter_name = "due"

    def lookups(self, request, model_admin):
        return [("overdue", "Overdue"), ("today", "Due in the next 24 hours"), ("later", "Due later")]

    def queryset(self, request, queryset):
        now = timezone.now()
        pending = queryset.filter(status=Task.Status.PENDING)
        if self.value() == "overdue":
            return pending.filter(due_at__lt=now)
        if self.value() == "today":
            return pending.filter(due_at__gte=now, due_at__lt=now + timedelta(days=1))
        if self.value() == "later":
            return pending.filter(due_at__gte=now + timedelta(days=1))
        return queryset


class SlaFilter(admin.SimpleListFilter):
    """Whether a task was answered by its due time: the dashboard's "done within SLA" links here."""

    title = "SLA"
    parameter_name = "sla"

    def lookups(self, request, model_admin):
        return [("met", "Done in time"), ("missed", "Done late or overdue")]

    def queryset(self, request, queryset):
        done = queryset.filter(status=Task.Status.DONE)
        if self.value() == "met":
            return done.filter(completed_at__lte=F("due_at"))
        if self.value() == "missed":
            late = Q(status=Task.Status.DONE, completed_at__gt=F("due_at"))
            return queryset.filter(late | Q(status=Task.Status.PENDING, due_at__lt=timezone.now()))
        return queryset


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = (
            "contact", "type_category", "status", "priority", "due_at", "assigned_to", "action_needed",
            "action_needed_reason", "suggested_actions",
        )  # fmt: skip
        labels = {"type_category": "type"}

    def clean(self):
        cleaned = super().clean()
        owner, contact = cleaned.get("assigned_to"), cleaned.get("contact")
        if owner and contact:
            may_own = selectors.task_assignees(store_ids=[contact.store_id], shared_pool=contact.store_id is None)
            if not may_own.filter(pk=owner.pk):
                self.add_error("assigned_to", "Pick someone who works at this task's store.")
        return cleaned


@admin.register(Task)
class TaskAdmin(StoreScopedAdminMixin, ExportMixin, admin.ModelAdmin):
    resource_classes = [TaskResource]
    export_formats = [CSV]
    form = TaskForm
    list_display = (
        "due_display", "contact", "store", "task_type", "priority", "status", "assigned_to", "action_needed_reason",
    )  # fmt: skip
    list_filter = ("status", DueFilter, SlaFilter, "priority", "task_type", ("store", StoreListFilter), "due_at")
    search_fields = (
        "=contact__email", "=contact__phone", "contact__first_name", "contact__last_name", "action_needed_reason",
    )  # fmt: skip
    date_hierarchy = "due_at"
    ordering = ("due_at", "pk")
    list_select_related = ("contact", "store", "assigned_to")
    autocomplete_fields = ("contact",)
    paginator = CappedCountPaginator
    show_full_result_count = False
    readonly_fields = (
        "source_type", "source_lead", "arrived_at", "completed_at", "completed_by", "created_at", "updated_at",
    )  # fmt: skip
    actions = ["mark_done"]

    def get_fields(self, request, obj=None):
        return [*TaskForm.Meta.fields, *self.readonly_fields]

    def has_delete_permission(self, request, obj=None):
        return False  # cancel instead: the task is the record of what was asked

    def has_export_permission(self, request):
        return self.has_view_permission(request)

    def save_model(self, request, obj, form, change):
        services.task_save(task=obj, actor=request.user.get_username())

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        if obj is not None and "assigned_to" in form.base_fields:
            # An existing task's owner comes from the staff of its own store (TaskForm.clean checks it again).
            form.base_fields["assigned_to"].queryset = selectors.task_assignees(
                store_ids=[obj.store_id], shared_pool=obj.store_id is None
            )
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "assigned_to":
            # Staff of the stores the user sees, as a plain list: Sales may not read users.
            store_ids = store_ids_for(request.user)
            visible = stores_visible(request.user).values("pk") if store_ids is None else store_ids
            kwargs["queryset"] = selectors.task_assignees(store_ids=visible, shared_pool=store_ids is None)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="due", ordering="due_at")
    def due_display(self, obj):
        due = f"{timezone.localtime(obj.due_at):%Y-%m-%d %H:%M}"
        if obj.is_overdue:
            return format_html('<b class="overdue" style="color:#ba2121">{} overdue</b>', due)
        return due

    @admin.action(description="Mark selected tasks done", permissions=["change"])
    def mark_done(self, request, queryset):
        count = services.tasks_mark_done(
            task_ids=list(queryset.values_list("pk", flat=True)), actor=request.user.get_username()
        )
        self.message_user(request, f"Marked {count} task(s) done.", messages.SUCCESS)

    # --- the sales work queue: "My tasks" and "Due soon", with one-click actions ------------------

    def get_urls(self):
        queue = self.admin_site.admin_view(self.work_queue_view)
        act = self.admin_site.admin_view(self.work_queue_act_view)
        return [
            path("queue/", queue, name="crm_task_queue"),
            path("queue/<uuid:task_id>/act/", act, name="crm_task_queue_act"),
        ] + super().get_urls()

    def work_queue_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        queue = selectors.work_queue(user=request.user, store_ids=store_ids_for(request.user),
                                     view=request.GET.get("view"))  # fmt: skip
        context = {
            **self.admin_site.each_context(request),
            "title": queue.title,
            "opts": self.model._meta,
            "view": queue.view,
            "tasks": queue.tasks,
            "truncated": queue.truncated,
            "limit": queue.limit,
            "now": queue.now,
            "can_act": self.has_change_permission(request),
            "snooze_choices": TaskActionForm.base_fields["snooze"].choices,
        }
        return TemplateResponse(request, "admin/crm/task/work_queue.html", context)

    def work_queue_act_view(self, request, task_id):
        back = request.POST.get("next") or reverse("admin:crm_task_queue")
        if not back.startswith(reverse("admin:crm_task_queue")):
            back = reverse("admin:crm_task_queue")  # never redirect off the queue
        if request.method != "POST":
            return HttpResponseRedirect(back)
        task = self.get_object(request, str(task_id))  # 404 outside the user's stores
        if not self.has_change_permission(request, task):
            raise PermissionDenied
        form = TaskActionForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{name}: {' '.join(errs)}" for name, errs in form.errors.items())
            self.message_user(request, f"Nothing changed: {errors}", messages.ERROR)
            return HttpResponseRedirect(back)
        data, actor = form.cleaned_data, request.user.get_username()
        common = {"task_id": task.pk, "actor": actor, "reason": data["reason"], "seen_updated_at": data["seen"]}
        try:
            if data["action"] == "contacted":
                services.task_mark_contacted(**common)
                done = f"{task.contact}: marked contacted."
            elif data["action"] == "done":
                services.task_mark_done(**common)
                done = f"{task.contact}: marked done."
            else:
                until = timezone.now() + timedelta(minutes=int(data["snooze"]))
                services.task_snooze(**common, until=until)
                done = f"{task.contact}: snoozed until {timezone.localtime(until):%Y-%m-%d %H:%M}."
        except services.TaskChanged:
            changed = f"{task.contact}: the task changed meanwhile; nothing was done. Check it again."
            self.message_user(request, changed, messages.WARNING)
            return HttpResponseRedirect(back)
        self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(back)


class TaskActionForm(forms.Form):
    """One work-queue action on one task, as the page showed it (`seen`: the task's updated_at then)."""

    action = forms.ChoiceField(choices=[("contacted", "contacted"), ("done", "done"), ("snooze", "snooze")])
    reason = forms.CharField(max_length=300, required=False, strip=True)
    snooze = forms.TypedChoiceField(
        choices=[("60", "1 hour"), ("240", "4 hours"), ("1440", "1 day")], required=False, coerce=str
    )
    seen = forms.DateTimeField(input_formats=["iso-8601"])

    def clean(self):
        data = super().clean()
        if data.get("action") == "snooze":
            if not data.get("reason"):
                self.add_error("reason", "Say why the task waits.")
            if not data.get("snooze"):
                self.add_error("snooze", "Choose how long it waits.")
        return data


class EventTypeFilter(admin.SimpleListFilter):
    """The event types the CRM records; the stock filter would read DISTINCT over the whole timeline."""

    title = "event type"
    parameter_name = "event_type__exact"

    def lookups(self, request, model_admin):
        types = [services.LEAD_CREATED_EVENT, services.CHAT_LINKED_EVENT, services.DOCS_SIGNED_IN_EVENT,
                 services.TASK_CONTACTED_EVENT, services.TASK_DONE_EVENT, services.TASK_SNOOZED_EVENT]  # fmt: skip
        return [(event_type, event_type) for event_type in types]

    def queryset(self, request, queryset):
        return queryset.filter(event_type=self.value()) if self.value() else queryset


@admin.register(TimelineEvent)
class TimelineEventAdmin(StoreScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Everything that happened to the contacts, newest first; append-only."""

    list_display = ("occurred_at", "contact", "store", "event_type", "actor_type", "entity_type", "entity_id")
    list_filter = (EventTypeFilter, ("store", StoreListFilter), "occurred_at")
    search_fields = ("=contact__email", "=contact__phone", "=entity_id", "event_type")
    date_hierarchy = "occurred_at"
    ordering = ("-occurred_at", "-pk")
    list_select_related = ("contact", "store")
    paginator = CappedCountPaginator
    show_full_result_count = False


# --- owners: reps' hours and away switch, rules naming an owner --------------------------------------

WEEKDAYS = [(1, "Mon"), (2, "Tue"), (3, "Wed"), (4, "Thu"), (5, "Fri"), (6, "Sat"), (7, "Sun")]


def _staff_in_scope(user):
    """Active staff the editor may pick as a rep, a manager or a rule's owner: those of the editor's stores."""
    staff = get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
    store_ids = store_ids_for(user)
    return staff if store_ids is None else staff.filter(stores__in=store_ids).distinct()


class RepProfileForm(forms.ModelForm):
    work_days = forms.TypedMultipleChoiceField(
        choices=WEEKDAYS, coerce=int, required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Takes new leads only on these days, between the start and the end (in the rep's time zone; "
        "an end before the start runs past midnight; equal: all day).",
    )  # fmt: skip
    timezone = forms.CharField(max_length=64, validators=[validate_timezone], initial="America/New_York")

    class Meta:
        model = RepProfile
        fields = ("user", "manager", "timezone", "work_days", "work_start", "work_end", "is_away", "max_open_tasks")

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("manager") and cleaned.get("manager") == cleaned.get("user"):
            self.add_error("manager", "A rep's manager is someone else.")
        return cleaned


@admin.register(RepProfile)
class RepProfileAdmin(admin.ModelAdmin):
    """Managers set reps' hours, caps and managers; a rep flips only their own away switch (the work queue)."""

    form = RepProfileForm
    list_display = (
        "user", "manager", "is_away", "on_shift", "days", "work_start", "work_end", "timezone", "open_tasks",
        "max_open_tasks", "last_assigned_at",
    )  # fmt: skip
    list_filter = ("is_away",)
    list_select_related = ("user", "manager")
    search_fields = ("user__username", "manager__username")
    readonly_fields = ("last_assigned_at",)
    ordering = ("user__username",)

    def get_queryset(self, request):
        # The reps of the editor's stores (every rep for whoever sees every store); fails closed as stores.scoping.
        profiles = (
            super()
            .get_queryset(request)
            .annotate(pending=Count("user__crm_tasks", filter=Q(user__crm_tasks__status=Task.Status.PENDING)))
        )
        store_ids = store_ids_for(request.user)
        return profiles if store_ids is None else profiles.filter(user__in=_staff_in_scope(request.user))

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404  # outside the scope: the same answer as an id never used
        return obj

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name in ("user", "manager"):
            kwargs["queryset"] = _staff_in_scope(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="work days")
    def days(self, obj):
        names = dict(WEEKDAYS)
        return " ".join(names.get(day, "?") for day in sorted(obj.work_days or [])) or "none"

    @admin.display(description="on shift now", boolean=True)
    def on_shift(self, obj):
        return assignment.rep_on_shift(obj, now=timezone.now())

    @admin.display(description="open tasks", ordering="pending")
    def open_tasks(self, obj):
        return obj.pending

    def get_urls(self):
        away = self.admin_site.admin_view(self.my_away_view)
        return [path("mine/away/", away, name="crm_repprofile_my_away")] + super().get_urls()

    def my_away_view(self, request):
        """POST away=1|0: the signed-in rep's own away switch (no permission on profiles needed: it is theirs)."""
        back = reverse("admin:crm_task_queue")
        if request.method != "POST":
            return HttpResponseRedirect(back)
        away = request.POST.get("away") == "1"
        if not assignment.rep_away_set(user_id=request.user.pk, away=away):
            raise Http404
        state = "away: no new leads come to you" if away else "back: new leads come to you on shift"
        self.message_user(request, f"You are {state}.", messages.SUCCESS)
        return HttpResponseRedirect(back)


class AssignmentRuleForm(forms.ModelForm):
    service_type = forms.ChoiceField(required=False, choices=[("", "any"), *lead_selectors.service_type_choices()])
    channel = forms.ChoiceField(required=False, choices=[("", "any"), *lead_selectors.channel_choices()])
    editor = None  # the requesting user, set by AssignmentRuleAdmin.get_form

    class Meta:
        model = AssignmentRule
        fields = ("store", "service_type", "channel", "owner", "priority", "is_active")

    def clean(self):
        cleaned = super().clean()
        store, owner = cleaned.get("store"), cleaned.get("owner")
        if store is None and "store" not in self.errors and not sees_every_store(self.editor):
            self.add_error("store", "Choose one of your stores: rules of no store are for managers of every store.")
        if owner is not None and "store" not in self.errors:
            store_id = store.pk if store else None
            if not assignment.store_reps(store_id=store_id).filter(pk=owner.pk).exists():
                where = "this store" if store else "every store (leads of no store)"
                self.add_error("owner", f"Pick someone who works at {where}.")
            elif not RepProfile.objects.filter(user=owner).exists():
                self.add_error("owner", "Give them a rep profile (working hours) first: the rule names reps on shift.")
        return cleaned


@admin.register(AssignmentRule)
class AssignmentRuleAdmin(StoreScopedAdminMixin, admin.ModelAdmin):
    """A named owner for new leads of a service type and/or channel, tried before round-robin."""

    form = AssignmentRuleForm
    list_display = ("priority", "store", "service_type", "channel", "owner", "is_active")
    list_filter = ("is_active", ("store", StoreListFilter))
    list_select_related = ("store", "owner")
    ordering = ("priority", "pk")

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        form.editor = request.user
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "owner":
            kwargs["queryset"] = _staff_in_scope(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

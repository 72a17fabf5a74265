from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from crm import services
from crm.models import Contact, Task, TimelineEvent


class TimelineEventInline(admin.TabularInline):
    model = TimelineEvent
    extra = 0
    can_delete = False
    ordering = ("-occurred_at",)
    fields = ("occurred_at", "event_type", "actor_type", "entity_type", "entity_id", "new_value")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # append-only


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("task_type", "status", "priority", "due_at", "action_needed_reason")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Contact)
class ContactAdmin(admin.ModelAdmin):
    list_display = ("phone", "first_name", "last_name", "store", "lifecycle_stage", "lead_status", "last_activity_at")
    list_filter = ("lifecycle_stage", "lead_status", "store")
    search_fields = ("=phone", "first_name", "last_name")
    list_select_related = ("store",)
    show_full_result_count = False
    fields = (
        "phone", "store", "franchise", "account_id", "lifecycle_stage", "lead_status", "first_name", "last_name",
        "last_activity_at", "created_at", "updated_at",
    )  # fmt: skip
    # The phone and the store are the contact's identity; the rest is set by the lead processor.
    readonly_fields = ("phone", "store", "franchise", "account_id", "last_activity_at", "created_at", "updated_at")
    inlines = [TaskInline, TimelineEventInline]

    def has_add_permission(self, request):
        return False  # contacts come from leads

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


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = (
            "contact", "type_category", "status", "priority", "due_at", "action_needed", "action_needed_reason",
            "suggested_actions",
        )  # fmt: skip
        labels = {"type_category": "type"}


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskForm
    list_display = ("due_display", "contact", "store", "task_type", "priority", "status", "action_needed_reason")
    list_filter = ("status", DueFilter, "priority", "store", "due_at")
    search_fields = ("=contact__phone", "contact__first_name", "contact__last_name", "action_needed_reason")
    date_hierarchy = "due_at"
    list_select_related = ("contact", "store")
    autocomplete_fields = ("contact",)
    show_full_result_count = False
    readonly_fields = ("source_type", "source_lead", "completed_at", "completed_by", "created_at", "updated_at")
    actions = ["mark_done"]

    def get_fields(self, request, obj=None):
        return [*TaskForm.Meta.fields, *self.readonly_fields]

    def has_delete_permission(self, request, obj=None):
        return False  # cancel instead: the task is the record of what was asked

    def save_model(self, request, obj, form, change):
        # The contact decides the store; staff pick the category, which is also the type for now.
        obj.store, obj.franchise, obj.account_id = obj.contact.store, obj.contact.franchise, obj.contact.account_id
        obj.task_type = obj.type_category
        if obj.status == Task.Status.DONE and obj.completed_at is None:
            obj.completed_at, obj.completed_by = timezone.now(), request.user.get_username()
        super().save_model(request, obj, form, change)

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

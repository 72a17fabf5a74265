"""ClickUp API v2: lead alerts as tasks in one list."""

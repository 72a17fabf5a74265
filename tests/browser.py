"""Page tests in a real headless Chromium, through Playwright's sync API.

Load as a plugin (`pytest_plugins = ["tests.browser"]` in tests/conftest.py) and
mark tests `@pytest.mark.browser`. Fixtures:

- `chromium`: one browser per test module (Debian's /usr/bin/chromium; never
  `playwright install`, which downloads a browser and fails here);
- `browser_page`: a fresh context (cookies, storage) and page per test, its
  relative URLs resolved against pytest-django's `live_server`;
- `staff_user`: a factory for staff users in the groups the migrations create.

`admin_login(page, username)` logs in through the admin login page.
"""

import functools
import os
import shutil

import pytest

# Django and the ORM are imported in the functions: a plugin may be loaded before django.setup().

CHROMIUM = "/usr/bin/chromium"
# As root Chromium needs --no-sandbox; the rest stop it stalling on calls to the internet.
# Playwright adds a fresh temporary --user-data-dir to every launch and removes it on
# close; it refuses one passed in `args`.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
STAFF_PASSWORD = "a long browser test password"


@pytest.fixture(scope="module")
def chromium():
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # The sync API runs an asyncio event loop in this thread (in a greenlet) from start to
    # stop, so Django sees a "running loop" and refuses ORM calls in the test and in the
    # database fixtures' teardown (SynchronousOnlyOperation). Nothing async really touches
    # the ORM here: the live server answers from its own thread. Hence the opt-out, for
    # this module only, and one browser per module rather than per session, so that the
    # loop is gone before later tests (which may call asyncio.run) start.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def browser_page(chromium, live_server):
    context = chromium.new_context(base_url=live_server.url, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def admin_login(page, username, password=STAFF_PASSWORD):
    """Log in through the admin login page; lands on the admin index."""
    from playwright.sync_api import expect

    page.goto("/admin/login/?next=/admin/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#user-tools")).to_contain_text(username)


def ensure_staff_groups():
    """Make the staff groups exist as `migrate` left them.

    Tests with `live_server` or `transactional_db` end by flushing every table;
    permissions come back through post_migrate but groups do not. Run the data
    migrations that grant group permissions again (their own code, on the
    migration state), rather than keeping a second copy of what each group holds.
    """
    from django.contrib.auth.models import Group

    from foundation import staff_groups as permissions

    groups = [permissions.OPERATIONS, permissions.SALES, permissions.MANAGERS]
    if Group.objects.filter(name__in=groups).count() == len(groups):
        return
    state_apps, grants = _grant_migrations()
    for grant in grants:
        grant(state_apps, None)


@functools.cache
def _grant_migrations():
    """The migrations' state and their group grants, in order: read once, as loading every migration takes
    about half a second and a flush between tests makes the groups go again."""
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.operations import RunPython

    from foundation import staff_groups as permissions

    loader = MigrationLoader(connection)
    grants = [
        operation.code
        for key in _all_nodes(loader)
        for operation in loader.graph.nodes[key].operations
        if isinstance(operation, RunPython) and operation.code.__globals__.get("grant") is permissions.grant
    ]
    return loader.project_state().apps, grants


def _all_nodes(loader):
    """Every migration, dependencies first."""
    seen, ordered = set(), []
    for leaf in sorted(loader.graph.leaf_nodes()):
        for key in loader.graph.forwards_plan(leaf):
            if key not in seen:
                seen.add(key)
                ordered.append(key)
    return ordered


@pytest.fixture
def staff_user(django_user_model):
    """`staff_user("ops", "Operations")` → a staff user in those groups, password STAFF_PASSWORD."""
    from django.contrib.auth.models import Group

    def make(username, *group_names):
        user = django_user_model.objects.create_user(username, password=STAFF_PASSWORD, is_staff=True)
        user.groups.add(*[Group.objects.get(name=name) for name in group_names])
        return user

    return make

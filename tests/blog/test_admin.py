"""Operations sees the blog cache's figures and purges it from the admin; others cannot."""

import re

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from blog import cache as posts_cache
from foundation.staff_groups import OPERATIONS, SALES
from tests.browser import admin_login

pytestmark = pytest.mark.django_db

PASSWORD = "a long test password"
PAGE = "admin:blog_blogcache_changelist"
PURGE = "admin:blog_blogcache_purge"


@pytest.fixture
def make_user(django_user_model):
    def make(username, *group_names):
        user = django_user_model.objects.create_user(username, password=PASSWORD, is_staff=True)
        user.groups.add(*[Group.objects.get(name=name) for name in group_names])
        return user

    return make


def test_operations_sees_generation_and_counters(client, make_user, wordpress):
    counted = posts_cache.outcome_counts()  # this process's counts of earlier tests are written first
    client.get("/api/posts")  # miss
    client.get("/api/posts")  # hit
    client.get("/api/posts?cache=false")  # bypass
    client.force_login(make_user("ops", OPERATIONS))
    response = client.get(reverse("admin:index"))
    assert reverse(PAGE) in response.content.decode()
    page = client.get(reverse(PAGE)).content.decode()
    assert f'<td id="blog-cache-generation">{posts_cache.current_generation()}</td>' in page
    for outcome, count in {"hit": 1, "miss": 1, "bypass": 1, "stale": 0}.items():
        assert f'<td id="blog-cache-{outcome}">{counted[outcome] + count}</td>' in page
    assert reverse(PURGE) in page


def test_purge_asks_for_confirmation_then_purges(client, make_user, wordpress):
    client.get("/api/posts")
    before = posts_cache.current_generation()
    client.force_login(make_user("ops", OPERATIONS))
    confirm = client.get(reverse(PURGE))
    assert "Yes, purge the blog cache" in confirm.content.decode()
    assert posts_cache.current_generation() == before, "nothing happens before the confirmation"
    done = client.post(reverse(PURGE), follow=True)
    assert posts_cache.current_generation() == before + 1
    assert f"generation {before} → {before + 1}" in done.content.decode()
    assert client.get("/api/posts")["X-Cache"] == "miss"


def test_sales_cannot_see_or_purge(client, make_user, wordpress):
    client.force_login(make_user("sales", SALES))
    before = posts_cache.current_generation()
    assert client.get(reverse(PAGE)).status_code == 403
    assert client.post(reverse(PURGE)).status_code == 403
    assert posts_cache.current_generation() == before


def test_a_viewer_without_purge_permission_sees_no_button_and_cannot_purge(client, django_user_model, wordpress):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_blogcache"))
    client.force_login(viewer)
    page = client.get(reverse(PAGE))
    assert page.status_code == 200
    assert reverse(PURGE) not in page.content.decode()
    assert client.post(reverse(PURGE)).status_code == 403


def test_purge_without_csrf_token_is_refused(make_user, wordpress):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(make_user("ops", OPERATIONS))
    before = posts_cache.current_generation()
    assert browser.post(reverse(PURGE)).status_code == 403
    assert posts_cache.current_generation() == before


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_operator_purges_the_blog_cache_in_a_browser(browser_page, staff_user, wordpress, tmp_path):
    page = browser_page
    staff_user("ops", OPERATIONS)
    hits = posts_cache.outcome_counts()["hit"]
    page.request.get("/api/posts")
    page.request.get("/api/posts")
    before = posts_cache.current_generation()

    admin_login(page, "ops")
    page.locator("tr.model-blogcache").get_by_role("link", name="Blog cache").click()
    expect(page.locator("h1")).to_have_text("Blog cache")
    expect(page.locator("#blog-cache-generation")).to_have_text(str(before))
    expect(page.locator("#blog-cache-hit")).to_have_text(str(hits + 1))
    page.screenshot(path=str(tmp_path / "blog-cache.png"), full_page=True)

    page.get_by_role("link", name="Purge the blog cache…").click()
    expect(page.locator("h1")).to_have_text("Purge the blog cache?")
    page.get_by_role("button", name="Yes, purge the blog cache").click()
    expect(page).to_have_url(re.compile(r"/admin/blog/blogcache/$"))
    expect(page.locator("ul.messagelist li.success")).to_contain_text(f"generation {before} → {before + 1}")
    expect(page.locator("#blog-cache-generation")).to_have_text(str(before + 1))
    page.screenshot(path=str(tmp_path / "blog-cache-purged.png"), full_page=True)
    assert posts_cache.current_generation() == before + 1

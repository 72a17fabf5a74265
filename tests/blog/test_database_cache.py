"""The zero-setup run's database cache: the same hit/miss, stale copy and one-step purge as on Redis."""

import pytest
from django.core.cache import cache
from django.core.management import call_command

from blog import cache as posts_cache

pytestmark = pytest.mark.django_db


@pytest.fixture
def database_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache",
                                   "LOCATION": "blog_test_cache_table"}}  # fmt: skip
    call_command("createcachetable", verbosity=0)
    settings.BLOG_CACHE_API_KEY = "key"
    yield
    cache.clear()


@pytest.mark.usefixtures("database_cache")
def test_hit_purge_and_stale_on_the_database_cache(client, wordpress, settings):
    assert client.get("/api/posts")["X-Cache"] == "miss"
    assert client.get("/api/posts")["X-Cache"] == "hit"
    generation = posts_cache.current_generation()
    response = client.delete("/api/posts/cache", headers={"X-Cache-Api-Key": "key"})
    assert response.status_code == 200
    assert posts_cache.current_generation() == generation + 1
    assert client.get("/api/posts")["X-Cache"] == "miss"
    assert wordpress.calls == 2

    settings.BLOG_CACHE_TTL_SECONDS = 0
    wordpress.status = 503
    assert client.get("/api/posts")["X-Cache"] == "stale"


@pytest.mark.usefixtures("database_cache")
def test_the_generation_does_not_expire_on_the_database_cache(wordpress):
    posts_cache.generation_advance()
    posts_cache.generation_advance()
    # BaseCache.incr writes back with the default 300 s timeout; the generation is made permanent again.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT expires FROM blog_test_cache_table WHERE cache_key LIKE %s", ["%blog:generation"])
        (expires,) = cursor.fetchone()
    assert expires.year == 9999

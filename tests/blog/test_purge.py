"""DELETE /api/posts/cache and POST /api/posts/cache/clear: key or Standard Webhooks signature, O(1) purge."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from standardwebhooks.webhooks import Webhook

from blog import cache as posts_cache
from foundation.cache import shared_redis
from standins.wordpress import make_post

KEY = "purge-key-for-tests"
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


@pytest.fixture
def purge_key(settings):
    settings.BLOG_CACHE_API_KEY = KEY
    settings.BLOG_PURGE_SIGNING_SECRET = ""


def purge(client, *, method="delete", key=None, body=b"", headers=None):
    headers = dict(headers or {})
    if key is not None:
        headers["X-Cache-Api-Key"] = key
    path = "/api/posts/cache" if method == "delete" else "/api/posts/cache/clear"
    return getattr(client, method)(path, data=body, content_type="application/json", headers=headers)


def signed_headers(body: bytes, *, secret=SECRET, msg_id="msg_1", at=None):
    at = at or datetime.now(tz=UTC)
    signature = Webhook(secret).sign(msg_id, at, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signature}


def test_while_no_key_is_set_the_purge_does_not_exist(client, settings):
    settings.BLOG_CACHE_API_KEY = settings.BLOG_PURGE_SIGNING_SECRET = ""
    assert purge(client, key="anything").status_code == 404
    assert purge(client, method="post", key="anything").status_code == 404


@pytest.mark.usefixtures("purge_key")
@pytest.mark.parametrize("key", [None, "", "wrong-key", KEY + "x"])
def test_a_wrong_or_missing_key_purges_nothing(client, wordpress, key):
    client.get("/api/posts")
    generation = posts_cache.current_generation()
    response = purge(client, key=key)
    assert response.status_code == 401
    assert json.loads(response.content)["error"]["code"] == "invalid_credentials"
    assert posts_cache.current_generation() == generation
    assert client.get("/api/posts")["X-Cache"] == "hit"


@pytest.mark.usefixtures("purge_key")
@pytest.mark.parametrize("method", ["delete", "post"])
def test_the_right_key_makes_every_cached_answer_unreachable_at_once(client, wordpress, method):
    paths = [f"/api/posts?page={page}" for page in (1, 2, 3)] + ["/api/posts/post-1", "/api/posts/nothing"]
    for path in paths:
        client.get(path)
    assert all(client.get(path)["X-Cache"] == "hit" for path in paths)
    before = posts_cache.current_generation()

    wordpress.posts.append(make_post(100, title="Just published"))
    response = purge(client, method=method, key=KEY)
    assert response.status_code == 200
    assert json.loads(response.content) == {
        "purged": True, "generation": before + 1, "previousGeneration": before, "scope": "posts",
    }  # fmt: skip
    calls = wordpress.calls
    answers = [client.get(path) for path in paths]
    assert [answer["X-Cache"] for answer in answers] == ["miss"] * len(paths)
    assert wordpress.calls == calls + len(paths)
    assert json.loads(answers[0].content)["posts"][0]["title"] == "Just published"


@pytest.mark.usefixtures("purge_key")
def test_a_purge_is_one_write_whatever_the_number_of_entries(client, wordpress):
    for page in range(1, 4):
        for per_page in range(1, 30):
            client.get(f"/api/posts?page={page}&per_page={per_page}")
    before = redis_calls()
    assert purge(client, key=KEY).status_code == 200
    # The cost does not grow with the 87 entries: no scan, no per-key delete.
    calls = redis_calls()
    assert {name: calls.get(name, 0) - before.get(name, 0) for name in ("scan", "keys", "del", "unlink")} == {
        "scan": 0, "keys": 0, "del": 0, "unlink": 0,
    }  # fmt: skip
    assert client.get("/api/posts?page=3&per_page=29")["X-Cache"] == "miss"


def redis_calls() -> dict[str, int]:
    stats = shared_redis().info("commandstats")
    return {name.removeprefix("cmdstat_"): stat["calls"] for name, stat in stats.items()}


def test_a_lost_generation_restarts_above_every_earlier_one(client, wordpress, settings):
    client.get("/api/posts")
    old = posts_cache.current_generation()
    cache.delete(posts_cache.GENERATION_KEY)
    assert posts_cache.current_generation() > old
    assert client.get("/api/posts")["X-Cache"] == "miss"


@pytest.fixture
def signing(settings):
    settings.BLOG_CACHE_API_KEY = ""
    settings.BLOG_PURGE_SIGNING_SECRET = SECRET


@pytest.mark.usefixtures("signing")
def test_a_signed_publish_event_purges_once(client, wordpress):
    before = posts_cache.current_generation()
    body = json.dumps({"type": "post.published", "data": {"id": 100}}).encode()
    response = purge(client, method="post", body=body, headers=signed_headers(body))
    assert response.status_code == 200
    assert json.loads(response.content)["generation"] == before + 1
    # The same message again (WordPress retrying after a lost answer): applied already.
    again = purge(client, method="post", body=body, headers=signed_headers(body))
    assert again.status_code == 200
    assert json.loads(again.content)["purged"] is False
    assert posts_cache.current_generation() == before + 1


@pytest.mark.usefixtures("signing")
@pytest.mark.parametrize("fault", ["other secret", "changed body", "too old", "garbage", "none"])
def test_a_bad_signature_purges_nothing(client, wordpress, fault):
    before = posts_cache.current_generation()
    body = b'{"type": "post.published"}'
    other = "whsec_" + base64.b64encode(b"another secret of thirty-two by").decode()
    headers = {
        "other secret": signed_headers(body, secret=other),
        "changed body": signed_headers(b'{"type": "post.updated"}'),
        "too old": signed_headers(body, at=datetime.now(tz=UTC) - timedelta(minutes=10)),
        "garbage": {"webhook-id": "x", "webhook-timestamp": "y", "webhook-signature": "v1"},
        "none": {},
    }[fault]
    response = purge(client, body=body, headers=headers)
    assert response.status_code == 401
    assert posts_cache.current_generation() == before


def test_with_both_configured_the_key_still_works(client, wordpress, settings):
    settings.BLOG_CACHE_API_KEY, settings.BLOG_PURGE_SIGNING_SECRET = KEY, SECRET
    assert purge(client, key=KEY).status_code == 200


@pytest.mark.usefixtures("purge_key")
def test_a_large_body_is_refused(client, wordpress):
    assert purge(client, method="post", key=KEY, body=b"x" * (65 * 1024)).status_code == 413


@pytest.mark.usefixtures("signing")
def test_a_signed_purge_that_could_not_be_applied_is_applied_when_the_sender_retries(client, wordpress):
    posts_cache.current_generation()
    cache.set(posts_cache.GENERATION_KEY, "not a counter", timeout=None)  # Redis refuses to INCR it
    body = json.dumps({"type": "post.updated", "data": {"id": 100}}).encode()
    failed = purge(client, method="post", body=body, headers=signed_headers(body, msg_id="msg_retried"))
    assert failed.status_code == 503
    assert json.loads(failed.content)["error"]["code"] == "cache_unavailable"

    cache.delete(posts_cache.GENERATION_KEY)  # the cache works again
    before = posts_cache.current_generation()
    retried = purge(client, method="post", body=body, headers=signed_headers(body, msg_id="msg_retried"))
    assert retried.status_code == 200 and json.loads(retried.content)["purged"] is True
    assert posts_cache.current_generation() == before + 1

"""The baseline: a bare Django view answering the bytes that `GET /api/posts` serves, from the same cache key.

One cache read of a key worked out once per process (the first request's
generation), no validation, no throttle, no headers of ours: the floor the
cached proxy is compared with. Bench-only, never routed by the project.
"""

from django.core.cache import cache
from django.http import HttpResponse

from blog import cache as posts_cache
from blog.posts import PostsQuery

_key: list[str] = []


def bare_posts(request):
    if not _key:
        _key.append(posts_cache.entry_key(PostsQuery().cache_name, posts_cache.current_generation()))
    entry = cache.get(_key[0])
    return HttpResponse(entry.body, content_type="application/json")

import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def empty_cache():
    """Rate-limit buckets and throttles live in the shared cache: start every test without them."""
    cache.clear()
    yield
    cache.clear()

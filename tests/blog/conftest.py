import pytest
from django.core.cache import cache

from tests.blog.fake_wordpress import FakeWordPress


@pytest.fixture(autouse=True)
def empty_cache():
    """Posts entries, the generation, counters and throttles live in the shared cache."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def wordpress(settings):
    """A running fake WordPress the blog is configured to read from."""
    with FakeWordPress() as fake:
        settings.WORDPRESS_API_URL = fake.api_url
        settings.WORDPRESS_TIMEOUT_SECONDS = 1.0
        settings.SITE_URL = "https://www.example.com"
        yield fake

import pytest
from django.core.cache import cache

from standins.wordpress import WordPress


@pytest.fixture(autouse=True)
def empty_cache():
    """Posts entries, the generation, counters and throttles live in the shared cache."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def wordpress(settings):
    """A running WordPress stand-in the blog is configured to read from."""
    with WordPress() as fake:
        settings.WORDPRESS_API_URL = fake.api_url
        settings.WORDPRESS_TIMEOUT_SECONDS = 1.0
        settings.SITE_URL = "https://www.example.com"
        yield fake

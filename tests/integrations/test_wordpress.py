"""The WordPress client against a local WordPress answering as WP_REST_Posts_Controller does."""

import pytest

import jobs
from integrations.wordpress.client import PageOutOfRange, WordPressClient, client_from_settings
from standins.wordpress import WordPress


@pytest.fixture
def fake():
    with WordPress() as server:
        yield server


def client_for(fake, **kwargs):
    return WordPressClient(fake.api_url, read_timeout=kwargs.pop("read_timeout", 2.0), **kwargs)


def test_a_page_of_posts_comes_with_its_counts_from_the_headers(fake):
    page = client_for(fake).posts(page=2, per_page=10)
    assert (page.total, page.total_pages) == (25, 3)
    assert len(page.posts) == 10
    assert fake.requests[-1] == {"page": "2", "per_page": "10"}


def test_filters_fields_and_embeds_are_sent_as_wordpress_spells_them(fake):
    page = client_for(fake).posts(
        search="number 1", categories=[3, 4], tags=[7], orderby="title", order="asc",
        fields=["id", "slug", "_links", "_embedded"], embed=["author", "wp:featuredmedia"],
    )  # fmt: skip
    assert fake.requests[-1] == {
        "page": "1", "per_page": "10", "search": "number 1", "categories": "3,4", "tags": "7",
        "orderby": "title", "order": "asc", "_fields": "id,slug,_links,_embedded", "_embed": "author,wp:featuredmedia",
    }  # fmt: skip
    assert page.posts and set(page.posts[0]) == {"id", "slug", "_links", "_embedded"}
    assert set(page.posts[0]["_embedded"]) == {"author", "wp:featuredmedia"}


def test_a_page_past_the_end_is_its_own_error(fake):
    with pytest.raises(PageOutOfRange):
        client_for(fake).posts(page=4, per_page=10)


def test_with_zero_posts_every_page_is_an_empty_list(fake):
    fake.posts = []
    page = client_for(fake).posts(page=7)
    assert (page.posts, page.total, page.total_pages) == ([], 0, 0)


def test_one_post_by_slug_or_none(fake):
    client = client_for(fake)
    assert client.post_by_slug("post-3")["id"] == 3
    assert fake.requests[-1]["slug"] == "post-3"
    assert client.post_by_slug("no-such-post") is None


def test_per_page_out_of_bounds_is_permanent(fake):
    with pytest.raises(jobs.PermanentError) as failure:
        client_for(fake).posts(per_page=101)
    assert not isinstance(failure.value, PageOutOfRange)


def test_server_errors_and_slowness_are_transient(fake):
    fake.status = 503
    with pytest.raises(jobs.TransientError):
        client_for(fake).posts()
    fake.status, fake.delay = None, 0.5
    with pytest.raises(jobs.TransientError):
        client_for(fake, read_timeout=0.2).posts()


def test_a_wrong_api_root_is_permanent(fake):
    with pytest.raises(jobs.PermanentError):
        WordPressClient(f"http://127.0.0.1:{fake.port}/not-wp-json", read_timeout=2.0).posts()


def test_application_password_is_sent_as_basic_auth(fake):
    fake.credentials = ("editor", "abcd efgh ijkl mnop")
    with pytest.raises(jobs.PermanentError):
        client_for(fake).posts()
    assert client_for(fake, username="editor", app_password="abcd efgh ijkl mnop").posts().total == 25


def test_unconfigured_means_no_client(settings):
    settings.WORDPRESS_API_URL = ""
    assert client_from_settings() is None

"""The project's URLs plus `GET /bench/bare-posts`, the baseline of the blog benchmark."""

from django.urls import path

from bench.blog.bare import bare_posts
from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("bench/bare-posts", bare_posts, name="bench-bare-posts"), *project_urlpatterns]

from django.urls import path

from blog import api

urlpatterns = [
    path("api/posts", api.posts_view(), name="blog-posts"),
    path("api/posts/cache", api.PurgeDeleteView.as_view(), name="blog-cache-purge"),
    path("api/posts/cache/clear", api.PurgeClearView.as_view(), name="blog-cache-clear"),
    path("api/posts/<str:slug>", api.PostDetailView.as_view(), name="blog-post-detail"),
]

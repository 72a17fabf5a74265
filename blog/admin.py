from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from blog import selectors, services
from blog.models import BlogCache
from foundation.admin_actions import ReadOnlyAdminMixin


@admin.register(BlogCache)
class BlogCacheAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """One page instead of a change list: the cache's generation and counters, and the purge."""

    def has_purge_permission(self, request):
        return request.user.has_perm("blog.purge_blogcache")

    def get_urls(self):
        return [
            path("", self.admin_site.admin_view(self.cache_view), name="blog_blogcache_changelist"),
            path("purge/", self.admin_site.admin_view(self.purge_view), name="blog_blogcache_purge"),
        ]

    def cache_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        overview = selectors.cache_overview()
        answered = sum(overview.counts.values())
        context = {
            **self._context(request, "Blog cache"),
            "overview": overview,
            "hit_ratio": f"{100 * overview.counts['hit'] / answered:.1f} %" if answered else "–",
            "can_purge": self.has_purge_permission(request),
        }
        return TemplateResponse(request, "admin/blog/blogcache/cache.html", context)

    def purge_view(self, request):
        if not self.has_purge_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            result = services.blog_cache_purge(actor=request.user.get_username())
            self.message_user(
                request,
                f"Blog cache purged: generation {result.previous_generation} → {result.generation}; "
                "every cached posts answer is refetched from WordPress on its next request.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(reverse("admin:blog_blogcache_changelist"))
        context = {**self._context(request, "Purge the blog cache?"), "overview": selectors.cache_overview()}
        return TemplateResponse(request, "admin/blog/blogcache/confirm_purge.html", context)

    def _context(self, request, title):
        return {**self.admin_site.each_context(request), "title": title, "opts": self.model._meta}

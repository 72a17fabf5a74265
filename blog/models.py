from django.db import models


class BlogCache(models.Model):
    """No table: the admin's "Blog cache" page and its permissions (view the figures, purge)."""

    class Meta:
        managed = False
        default_permissions = ("view",)
        permissions = [("purge_blogcache", "Can purge the blog cache")]
        verbose_name = "blog cache"
        verbose_name_plural = "blog cache"

    def __str__(self):
        return "blog cache"

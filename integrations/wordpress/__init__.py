"""WordPress REST API v2 client (posts only)."""

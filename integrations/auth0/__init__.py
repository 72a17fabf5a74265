"""Auth0: OpenID Connect login of docs-site readers (authorization code flow with PKCE)."""

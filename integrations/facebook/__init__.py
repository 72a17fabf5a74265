"""Facebook Graph API client (Lead Ads: reading a lead by its leadgen id)."""

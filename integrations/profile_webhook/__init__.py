"""Delivery of signed-in docs users' profiles to the CRM's webhook (`CRM_WEBHOOK_URL`), signed per Standard Webhooks."""

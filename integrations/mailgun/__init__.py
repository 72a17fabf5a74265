"""Mailgun's Events API: whether a message was already accepted, for a send whose answer was lost."""

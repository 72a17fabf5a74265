"""Pipedrive API v1: persons, organizations, leads, notes and the Smart BCC address."""

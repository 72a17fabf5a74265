"""IMAP: the client for lead-notification mailboxes."""

from integrations.imap.client import FetchedMessage, ImapClient, MailboxSettings

__all__ = ["FetchedMessage", "ImapClient", "MailboxSettings"]

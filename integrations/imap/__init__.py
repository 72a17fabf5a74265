"""IMAP: the client for lead-notification mailboxes."""

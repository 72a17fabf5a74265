"""Lead notifications as the stores' booking systems send them, and an IMAP session of its own to the
mailbox stand-in (standins.mailbox) for looking at what a poller left behind: for the tests and the IMAP
benchmark."""

import ssl
from email.message import EmailMessage
from email.utils import format_datetime

from imapclient import IMAPClient

STORE_SENDER = "studio0421@otf-mail.example.com"
TRACKING_DOMAIN = "leads.example.org"


def lead_message(
    *,
    first="Jane",
    last="Doe",
    phone="(415) 555-0132",
    email="",
    lead_type="Web Lead",
    tracking_id="ST0421",
    sender=STORE_SENDER,
    sent_at=None,
    html=False,
) -> bytes:
    """A lead notification like a store's booking system sends: labelled lines, text or HTML only."""
    rows = [("Lead Type", lead_type), ("First Name", first), ("Last Name", last), ("Phone", phone), ("Email", email)]
    rows = [(label, value) for label, value in rows if value]
    message = EmailMessage()
    message["From"] = f"Studio <{sender}>"
    message["To"] = f"lead-tracking+{tracking_id}@{TRACKING_DOMAIN}" if tracking_id else f"inbox@{TRACKING_DOMAIN}"
    message["Subject"] = f"New {lead_type}: {first} {last}".strip()
    if sent_at is not None:
        message["Date"] = format_datetime(sent_at)
    if html:
        cells = "".join(f"<tr><th>{label}</th><td>{value}</td></tr>" for label, value in rows)
        message.set_content(f"<html><body><p>New lead</p><table>{cells}</table></body></html>", subtype="html")
    else:
        message.set_content("You have a new lead!\n\n" + "".join(f"{label}: {value}\n" for label, value in rows))
    return message.as_bytes()


def imap_session(server, username, password) -> IMAPClient:
    """A second, independent IMAP session for looking at what the poller left behind."""
    client = IMAPClient(
        server.host, port=server.imaps_port, ssl=True, timeout=10,
        ssl_context=ssl.create_default_context(cafile=str(server.ca_file)),
    )  # fmt: skip
    client.login(username, password)
    client.select_folder("INBOX", readonly=True)
    return client

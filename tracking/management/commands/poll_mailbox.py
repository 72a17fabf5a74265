from django.core.management.base import BaseCommand, CommandError

from foundation.commands import add_since_argument
from jobs import PermanentError, TransientError
from tracking.selectors import mailbox_names_active, mailbox_settings
from tracking.services import mailbox_poll


class Command(BaseCommand):
    help = (
        "Poll lead mailboxes now, in this process. With --include-seen it re-reads messages already read: "
        "a safe backfill, since every lead is upserted on its dedup key."
    )

    def add_arguments(self, parser):
        parser.add_argument("--mailbox", metavar="NAME", help="Only this mailbox (default: every active one).")
        add_since_argument(parser, what="Only messages received", required=False)
        parser.add_argument("--include-seen", action="store_true", help="Also messages already marked seen.")

    def handle(self, *args, mailbox=None, since=None, include_seen=False, **options):
        names = [mailbox] if mailbox else mailbox_names_active()
        if not names:
            raise CommandError("no mailbox to poll: set IMAP_HOST or add one in admin")
        failures = 0
        since_day = since.date() if since else None  # IMAP SEARCH SINCE takes a day
        for name in names:
            try:
                result = mailbox_poll(mailbox=mailbox_settings(name), since=since_day, include_seen=include_seen)
            except (LookupError, PermanentError, TransientError) as exc:
                failures += 1
                self.stderr.write(f"{name}: {exc}")
                continue
            self.stdout.write(
                f"{name}: {result.found} found, {result.captured} captured ({result.failed_parse} failed to parse), "
                f"{result.parked} parked for retry, {result.left_unseen} left unseen"
            )
        if failures:
            raise CommandError(f"{failures} mailbox(es) could not be polled")

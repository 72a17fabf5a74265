"""`manage.py redact < in.txt > out.txt`: the CRM redaction, from stdin to stdout."""

import sys

from django.core.management.base import BaseCommand

from crm.redaction import redact


class Command(BaseCommand):
    help = "Mask emails, IPs, phone numbers, cards, SSNs, tokens and secrets in stdin; write the result to stdout."
    # call_command(..., stdin=StringIO(...)) in tests, like createsuperuser.
    stealth_options = ("stdin",)

    def handle(self, *args, **options):
        # The whole input at once: a PEM private key spans lines.
        text = (options.get("stdin") or sys.stdin).read()
        self.stdout.write(redact(text), ending="")

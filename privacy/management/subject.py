"""What the data-subject commands share: naming the person, and who is asking."""

import getpass

from django.core.management.base import CommandError

from privacy.selectors import Subject, SubjectInvalid, subject_named


def add_subject_arguments(parser):
    parser.add_argument("--email", default="", help="The person's email (any case).")
    parser.add_argument("--phone", default="", help="The person's phone (E.164, or national in PHONE_DEFAULT_REGION).")
    parser.add_argument(
        "--actor", default="", help="Who asks, for the audit record (default: the operating system user)."
    )


def subject_from(options) -> Subject:
    try:
        return subject_named(email=options["email"], phone=options["phone"])
    except SubjectInvalid as invalid:
        raise CommandError(" ".join(f"--{name}: {message}" for name, message in invalid.fields.items())) from invalid


def actor_from(options) -> str:
    return options["actor"] or f"{getpass.getuser()} (manage.py)"

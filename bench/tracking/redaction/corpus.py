"""A labeled corpus for the redaction benchmark, generated from a seed.

    .venv/bin/python bench/tracking/redaction/corpus.py [--seed 5] [--count 6000] [--out corpus.jsonl]

Each sample is a short free text of the kinds we deliver (agent intents, docs
search terms, chat questions) with the exact character span and class of every
piece of personal data or secret in it. The span is what must not leak: the
whole email or number, the token or secret value, the user:password of a URL.
Clean samples and look-alikes (dates, versions, prices, order numbers,
Luhn-invalid numbers, SSNs with area 000/666/9xx, digests, UUIDs, plain URLs,
"max_tokens=512", "password: see the docs") measure false positives.

Same seed, same corpus: the generator uses one random.Random and libphonenumber's
metadata only.
"""

import argparse
import base64
import ipaddress
import json
import random
import string
import sys
from dataclasses import dataclass, field

import phonenumbers

CLASSES = ("EMAIL", "IP", "PHONE", "CARD", "SSN", "TOKEN", "SECRET", "URL_CREDENTIALS")


@dataclass
class Sample:
    text: str
    entities: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, class)


def generate(seed: int, count: int) -> list[Sample]:
    rng = random.Random(seed)
    return [_sample(rng, clean=rng.random() < 0.3) for _ in range(count)]


# --- assembling a sample ---------------------------------------------------------------------

LEADS = [
    "User wants to",
    "Agent intent: help the user",
    "Trying to",
    "Question from the chat:",
    "search:",
    "The customer asked how to",
    "Context: the developer needs to",
    "Support request -",
    "Hi team, I need to",
    "Follow-up:",
]
MIDDLES = [
    "configure the connector",
    "debug a failing deployment",
    "migrate the cluster",
    "set up the console",
    "rotate credentials before the audit",
    "compare pricing tiers",
    "check the schema registry",
    "reproduce the timeout in staging",
    "upgrade the Helm chart",
    "read the getting started guide",
]
JOINERS = [" ", ", ", " and ", "; ", " - ", ". ", "\n", " (", " with "]
TAILS = ["", ".", "?", " please.", " asap", " thanks!", " before Friday.", "\n"]


def _sample(rng: random.Random, *, clean: bool) -> Sample:
    sample = Sample("")
    _append(sample, f"{rng.choice(LEADS)} {rng.choice(MIDDLES)}")
    for _ in range(rng.randint(1, 3)):
        _append(sample, rng.choice(JOINERS))
        if clean or rng.random() < 0.25:
            _append(sample, _look_alike(rng))
        else:
            kind = rng.choice(CLASSES)
            before, secret, after = ENTITY_MAKERS[kind](rng)
            _append(sample, before)
            start = len(sample.text)
            _append(sample, secret)
            sample.entities.append((start, len(sample.text), kind))
            _append(sample, after)
    _append(sample, rng.choice(TAILS))
    return sample


def _append(sample: Sample, text: str) -> None:
    sample.text += text


# --- personal data and secrets: (text before, the span, text after) --------------------------

FIRST = ["ada", "grace", "alan", "linus", "margaret", "ken", "barbara", "dennis", "radia", "tim", "zoe", "omar"]
LAST = ["lovelace", "hopper", "turing", "torvalds", "hamilton", "thompson", "liskov", "ritchie", "perlman", "lee"]
DOMAINS = ["example.com", "acme.io", "mail.example.co.uk", "corp.example.de", "startup.dev", "uni.example.edu"]


def _email(rng):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    local = rng.choice(
        [first, f"{first}.{last}", f"{first[0]}{last}", f"{first}_{last}{rng.randint(1, 99)}", f"{first}+crm"]
    )
    address = f"{local}@{rng.choice(DOMAINS)}"
    if rng.random() < 0.1:
        address = address.title()
    return rng.choice(["email ", "reach me at ", "contact: ", "from ", "<", "email="]), address, rng.choice(["", ">"])


def _ip(rng):
    kind = rng.random()
    if kind < 0.55:
        address = str(ipaddress.IPv4Address(rng.getrandbits(32) | 0x01000000))
    elif kind < 0.75:
        address = str(ipaddress.IPv6Address((0x20010DB8 << 96) | rng.getrandbits(64)))
    elif kind < 0.85:
        address = f"fe80::{rng.getrandbits(16):x}:{rng.getrandbits(16):x}%eth{rng.randint(0, 3)}"
    elif kind < 0.95:
        address = ipaddress.IPv6Address(rng.getrandbits(128)).exploded
    else:
        address = f"::ffff:{ipaddress.IPv4Address(rng.getrandbits(32))}"
    before = rng.choice(["from ip ", "client ", "host ", "bind to ", "X-Forwarded-For: "])
    after = rng.choice(["", f":{rng.randint(1024, 65535)}" if ":" not in address else "", " (blocked)"])
    return before, address, after


US_AREA_CODES = [
    "201",
    "202",
    "212",
    "213",
    "305",
    "312",
    "404",
    "415",
    "503",
    "512",
    "617",
    "646",
    "702",
    "718",
    "917",
]
PHONE_REGIONS = ["GB", "DE", "FR", "IN", "BR", "AU", "JP", "ES", "IT", "NL", "MX", "ZA", "SG", "SE", "PL"]


def _phone(rng):
    if rng.random() < 0.55:
        area = rng.choice(US_AREA_CODES)
        exchange = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
        line = f"{rng.randint(0, 9999):04d}"
        number = rng.choice(
            [
                f"({area}) {exchange}-{line}",
                f"{area}-{exchange}-{line}",
                f"{area}.{exchange}.{line}",
                f"+1 {area} {exchange} {line}",
                f"+1-{area}-{exchange}-{line}",
                f"+1{area}{exchange}{line}",
            ]
        )
    else:
        number = _international_phone(rng)
    parsed = phonenumbers.parse(number, "US")
    if not phonenumbers.is_valid_number(parsed):
        return _phone(rng)  # e.g. an exchange that is not in service: draw again
    return rng.choice(["call ", "phone: ", "mobile ", "text me on ", "tel "]), number, ""


def _international_phone(rng):
    region = rng.choice(PHONE_REGIONS)
    kind = rng.choice([phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE])
    example = phonenumbers.example_number_for_type(region, kind)
    digits = str(example.national_number)
    # Vary the last four digits of the country's own example: still a real numbering plan.
    varied = digits[:-4] + f"{rng.randint(0, 9999):04d}"
    number = phonenumbers.parse(f"+{example.country_code}{varied}")
    style = rng.choice([phonenumbers.PhoneNumberFormat.INTERNATIONAL, phonenumbers.PhoneNumberFormat.E164])
    return phonenumbers.format_number(number, style)


CARD_PREFIXES = [("4", 16), ("4", 13), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16)]
CARD_PREFIXES += [("65", 16), ("3528", 16), ("36", 14), ("62", 16), ("62", 19)]


def _card(rng):
    prefix, length = rng.choice(CARD_PREFIXES)
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    digits = body + str(_luhn_check_digit(body))
    if length == 16 and rng.random() < 0.6:
        separator = rng.choice(" -")
        digits = separator.join(digits[i : i + 4] for i in range(0, 16, 4))
    elif length == 15 and rng.random() < 0.5:
        digits = f"{digits[:4]} {digits[4:10]} {digits[10:]}"
    return rng.choice(["card ", "paid with ", "cc: ", "number "]), digits, rng.choice(["", " exp 12/29"])


def _luhn_check_digit(body: str) -> int:
    total = 0
    for index, char in enumerate(reversed(body)):
        digit = int(char)
        if index % 2 == 0:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return (10 - total % 10) % 10


def _ssn(rng):
    area = rng.choice([a for a in range(1, 900) if a != 666])
    group, serial = rng.randint(1, 99), rng.randint(1, 9999)
    if rng.random() < 0.2:
        return rng.choice(["SSN ", "ssn: ", "Social Security Number "]), f"{area:03d}{group:02d}{serial:04d}", ""
    separator = "-" if rng.random() < 0.8 else " "
    return (
        rng.choice(["ssn ", "SSN: ", "social security ", "my number is "]),
        separator.join((f"{area:03d}", f"{group:02d}", f"{serial:04d}")),
        "",
    )


ALNUM = string.ascii_letters + string.digits


def _random(rng, alphabet, length):
    return "".join(rng.choice(alphabet) for _ in range(length))


def _jwt(rng):
    def part(data):
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": str(rng.getrandbits(40)), "iat": 1700000000 + rng.getrandbits(20)})
    return f"{header}.{payload}.{_random(rng, ALNUM + '-_', 43)}"


def _token(rng):
    shape = rng.randrange(12)
    token = [
        lambda: "sk-proj-" + _random(rng, ALNUM, 40),
        lambda: rng.choice(["sk_live_", "pk_live_", "sk_test_"]) + _random(rng, ALNUM, 24),
        lambda: rng.choice(["ghp_", "gho_"]) + _random(rng, ALNUM, 36),
        lambda: "github_pat_" + _random(rng, ALNUM + "_", 60),
        lambda: f"xox{rng.choice('abpr')}-{rng.randint(10**11, 10**12 - 1)}-{_random(rng, ALNUM, 24)}",
        lambda: "AKIA" + _random(rng, string.ascii_uppercase + string.digits, 16),
        lambda: "AIza" + _random(rng, ALNUM + "-_", 35),
        lambda: "glpat-" + _random(rng, ALNUM + "-_", 20),
        lambda: _jwt(rng),
        lambda: _random(rng, ALNUM, 40),  # no known prefix: long and random
        lambda: _random(rng, ALNUM, 32),
        lambda: _jwt(rng),
    ][shape]()
    if shape == 11:
        return rng.choice(["Authorization: Bearer ", "-H 'Authorization: Bearer ", "bearer "]), token, ""
    if shape == 10:
        return "Authorization: Bearer ", token, ""
    return rng.choice(["key ", "token ", "using ", "export OPENAI_KEY ", "the key is "]), token, ""


SECRET_KEYS = ["password", "DB_PASSWORD", "passwd", "pwd", "secret", "client_secret", "api_key", "apikey"]
SECRET_KEYS += ["access_key", "AWS_SECRET_ACCESS_KEY", "auth_token", "token", "x-api-key", "private_key"]
WORDS = ["hunter", "dragon", "sunshine", "monkey", "shadow", "swordfish", "letmein", "trustno", "orange"]


def _secret(rng):
    key = rng.choice(SECRET_KEYS)
    value = rng.choice(
        [
            f"{rng.choice(WORDS)}{rng.randint(1, 9999)}",
            f"{rng.choice(WORDS).title()}!{rng.randint(10, 99)}",
            _random(rng, ALNUM + "!#$%*", rng.randint(8, 24)),
            f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.choice(WORDS)}",
        ]
    )
    style = rng.randrange(6)
    if style == 0:
        return f"{key}=", value, ""
    if style == 1:
        return f"{key}: ", value, rng.choice(["", "\n"])
    if style == 2:
        return f'{{"{key}": "', value, '"}'
    if style == 3:
        return f"{key} = '", value, "'"
    if style == 4:
        return f"?user=ada&{key}=", value, "&page=2"
    body = "\n".join(_random(rng, ALNUM + "+/", 64) for _ in range(rng.randint(2, 5)))
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    return "key file:\n", block, ""


def _url_credentials(rng):
    scheme = rng.choice(["postgres", "mysql", "redis", "amqp", "https", "mongodb+srv", "ftp"])
    user = rng.choice(["admin", "app", rng.choice(FIRST), "svc_leads", ""])
    password = rng.choice([f"{rng.choice(WORDS)}{rng.randint(1, 999)}", _random(rng, ALNUM, 16)])
    userinfo = f"{user}:{password}" if user or rng.random() < 0.5 else password
    host = rng.choice(["db.internal", "cache.example.com", "broker", "files.example.org"])
    after = rng.choice(["", f":{rng.randint(1000, 9999)}", ":5432/leads", "/0", "/path?sslmode=require"])
    return f"{scheme}://", userinfo, f"@{host}{after}"


ENTITY_MAKERS = {
    "EMAIL": _email,
    "IP": _ip,
    "PHONE": _phone,
    "CARD": _card,
    "SSN": _ssn,
    "TOKEN": _token,
    "SECRET": _secret,
    "URL_CREDENTIALS": _url_credentials,
}


# --- look-alikes: must come out unchanged ----------------------------------------------------


def _look_alike(rng):
    return rng.choice(
        [
            lambda: f"on {rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            lambda: f"due {rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/{rng.randint(2019, 2026)}",
            lambda: f"at {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
            lambda: f"version {rng.randint(0, 30)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}",
            lambda: f"v{rng.randint(1, 25)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
            lambda: f"price ${rng.randint(1, 9)},{rng.randint(0, 999):03d}.{rng.randint(0, 99):02d}",
            lambda: f"order #{rng.randint(10000, 99999)}",
            lambda: f"ORD-{rng.randint(2019, 2026)}-{rng.randint(0, 999999):06d}",
            lambda: f"invoice INV-{rng.randint(1, 9999):04d}",
            lambda: f"ref {_luhn_invalid(rng)}",
            lambda: (
                f"id {rng.choice(['000', '666', '9' + str(rng.randint(10, 99))])}-{rng.randint(1, 99):02d}-"
                f"{rng.randint(1, 9999):04d}"
            ),
            lambda: f"uuid {_uuid(rng)}",
            lambda: f"sha {_random(rng, '0123456789abcdef', 40)}",
            lambda: f"digest sha256:{_random(rng, '0123456789abcdef', 64)}",
            lambda: f"see https://docs.example.com/{rng.choice(['get-started', 'connect', 'pricing'])}/",
            lambda: f"max_tokens={rng.choice([256, 512, 1024, 4096])}",
            lambda: "reset your password: open the settings page",
            lambda: "the token limit is too low",
            lambda: "bearer bonds are not supported",
            lambda: f"port localhost:{rng.randint(1024, 9999)}",
            lambda: "class getUserProfileByIdentifierV2Async",
            lambda: "setting MAX_RETRY_ATTEMPTS_FOR_WEBHOOK_DELIVERY_V2",
            lambda: f"read /docs/how-to-configure-the-cluster-in-{rng.randint(2019, 2026)}-for-production",
            lambda: f"build {rng.randint(2019, 2026)}.{rng.randint(1, 12)}.{rng.randint(1, 28)}-rc{rng.randint(1, 9)}",
            lambda: f"mac {':'.join(f'{rng.getrandbits(8):02x}' for _ in range(6))}",
            lambda: (
                f"ISBN 978-{rng.randint(0, 9)}-{rng.randint(10, 99)}-{rng.randint(100000, 999999)}-{rng.randint(0, 9)}"
            ),
            lambda: f"{rng.randint(2, 99)}% of {rng.randint(100, 9999)} requests",
            lambda: f"follow @{rng.choice(FIRST)}_{rng.choice(LAST)}",
            lambda: f"ext. {rng.randint(10, 999)}",
            lambda: f"room {rng.randint(100, 9999)}",
        ]
    )()


def _luhn_invalid(rng):
    body = rng.choice("23456") + "".join(rng.choice(string.digits) for _ in range(14))
    wrong = (_luhn_check_digit(body) + rng.randint(1, 9)) % 10
    return body + str(wrong)


def _uuid(rng):
    value = f"{rng.getrandbits(128):032x}"
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--count", type=int, default=6000)
    parser.add_argument("--out", type=argparse.FileType("w"), default=sys.stdout, help="JSON lines (default stdout)")
    args = parser.parse_args()
    for sample in generate(args.seed, args.count):
        args.out.write(json.dumps({"text": sample.text, "entities": sample.entities}) + "\n")


if __name__ == "__main__":
    main()

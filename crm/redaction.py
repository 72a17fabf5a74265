"""Masks personal data and secrets in free text before it leaves for a CRM.

`redact(text)` replaces each finding with a typed placeholder; `find_pii(text)`
returns the findings themselves (offsets into the text and their kind), for
previews and for measuring the redactor against labeled text.

- `[URL_CREDENTIALS]`: user and password in a URL; scheme, host and path stay:
  `postgres://[URL_CREDENTIALS]@db:5432/app`.
- `[TOKEN]`: API tokens and keys with a known prefix (`sk-`, `sk_live_`,
  `pk_live_`, `ghp_`, `gho_`, `github_pat_`, `xoxb-`, `AKIA…`, `AIza…`, `glpat-`,
  `npm_`, `whsec_`, JWTs `eyJ…`), the value of an `Authorization` header or of a
  `Bearer` token, and long random-looking strings.
- `[SECRET]`: the value in `key=value` / `key: value` when the key names a
  secret (password, passwd, pwd, secret, token, api_key, access_key,
  client_secret, auth, …), and PEM private key blocks.
- `[EMAIL]`: email addresses.
- `[CARD]`: payment card numbers: 13–19 digits, contiguous or grouped 4-4-4-4,
  4-6-5 or 4-6-4, issuer digit 2–6, Luhn-valid.
- `[SSN]`: US social security numbers `123-45-6789` / `123 45 6789` (or nine
  digits right after "SSN") whose area is not 000, 666 or 9xx, group not 00 and
  serial not 0000.
- `[IP]`: IPv4 and IPv6 addresses (with an IPv6 zone).
- `[PHONE]`: phone numbers libphonenumber finds valid and grouped the way their
  country writes them: international (`+44 20 7946 0958`) or US national
  (`(415) 555-2671`).

Left alone on purpose: dates, times, version numbers, prices, order numbers,
Luhn-invalid digit runs, hex digests and UUIDs, and names or organisations
(regex and libphonenumber only, no NER: the basis legal approved).

Detectors run in a fixed priority order, each on the text with earlier findings
blanked out, so a later detector never claims what an earlier one did: URL
credentials come before emails (`user:pass@host.com` looks like an email), known
tokens before `key=value` (so `token=ghp_…` reads `token=[TOKEN]`), and the
generic random-string rule runs last. Placeholders match no detector, and
detection repeats until a round finds nothing, so `redact(redact(x)) == redact(x)`.

Django-free on purpose: the benchmark in bench/tracking/ imports it bare.
"""

import ipaddress
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import phonenumbers
from django.conf import settings

# Claimed text is overwritten with this character before the next detector runs;
# no detector's pattern accepts it, so nothing can match across or into a finding.
_BLANK = "\x00"

Span = tuple[int, int]


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    start: int
    end: int
    kind: str  # the placeholder's name: EMAIL, TOKEN, ...


def redact(text: str) -> str:
    """The text with every finding replaced by its placeholder, e.g. `[EMAIL]`."""
    parts = []
    position = 0
    for finding in find_pii(text):
        parts.append(text[position : finding.start])
        parts.append(f"[{finding.kind}]")
        position = finding.end
    parts.append(text[position:])
    return "".join(parts)


def find_pii(text: str) -> list[Finding]:
    """Non-overlapping findings in text order."""
    findings: list[Finding] = []
    working = text
    # Until a round finds nothing: a rule may turn a candidate down because of the raw
    # text next to it ("0@A.COM001-01-0001" is no email while the SSN is glued to it),
    # and once that neighbour is a placeholder the verdict changes. Repeating makes the
    # output a fixed point, so redact(redact(x)) == redact(x).
    while True:
        found_in_round = False
        for kind, detect in _DETECTORS:
            found = [Finding(start, end, kind) for start, end in detect(working)]
            if found:
                findings.extend(found)
                working = _blank_out(working, found)
                found_in_round = True
        if not found_in_round:
            return sorted(findings)


def _blank_out(text: str, findings: list[Finding]) -> str:
    chars = list(text)
    for finding in findings:
        chars[finding.start : finding.end] = _BLANK * (finding.end - finding.start)
    return "".join(chars)


# Cheap tests let a detector skip its full pattern on text that cannot hold its kind:
# most free text has no "@", no "=", no run of four digits.
_FOUR_DIGITS = re.compile(r"\d{4}")


def _checked_matches(pattern: re.Pattern, text: str, is_valid: Callable[[re.Match], bool]) -> Iterator[re.Match]:
    """Matches that pass is_valid. A rejected candidate consumes nothing: the search resumes
    one character later, so "001-01-0001 2000 0000 0000 0006" still finds the card that
    starts inside the rejected 4-4-4-4 candidate "0001 2000 0000 0000"."""
    position = 0
    while match := pattern.search(text, position):
        if is_valid(match):
            yield match
            position = match.end()
        else:
            position = match.start() + 1


# --- URL credentials ----------------------------------------------------------------------
# Greedy up to the last "@" before the path, so a raw "@" inside a password is covered too.
# The host starts with a letter or digit, or is an IPv6 literal: never a placeholder.
# Linear: every scheme-like run is consumed whole (possessive), whether "://user@" follows it or
# not, so the search never restarts inside a run ("a.a.a.…@" was quadratic). A run without
# credentials after it matches with no userinfo and is passed over.
_URL_USERINFO = re.compile(
    r"\b[a-z][a-z0-9+.-]*+(?:://(?P<userinfo>[^\s/?#\[\]\x00]+)@(?=[a-z0-9]|\[[0-9a-f:.]+\]))?", re.I
)


def _url_credentials(text: str) -> Iterator[Span]:
    if "@" not in text or "://" not in text:
        return
    for match in _URL_USERINFO.finditer(text):
        if match["userinfo"] is not None:
            yield match.span("userinfo")


# --- Authorization headers and bearer tokens --------------------------------------------
_AUTH_SCHEMES = r"(?:bearer|basic|digest|token|apikey)"
_AUTHORIZATION = re.compile(
    # The scheme is possessive: once read it is never re-read as the value.
    rf"""\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?P<scheme>{_AUTH_SCHEMES}\s+)?+(?P<value>[^\s"',;\[\x00]+)""",
    re.I,
)
# A bearer value must hold a digit, so "bearer bonds" or "Bearer of bad news" stay prose.
_BEARER = re.compile(r"\bbearer\s+(?P<value>(?=[\w\-.~+/]*\d)[\w\-.~+/]{8,}=*)", re.I)


def _authorization_values(text: str) -> Iterator[Span]:
    if "authorization" not in text.lower():
        return
    for match in _checked_matches(_AUTHORIZATION, text, _is_credential):
        yield match.span("value")


def _is_credential(match: re.Match) -> bool:
    # Without a scheme, "authorization: required" is prose; a credential has a digit.
    return bool(match["scheme"]) or any(c.isdigit() for c in match["value"])


def _bearer_tokens(text: str) -> Iterator[Span]:
    if "bearer" not in text.lower():
        return
    for match in _BEARER.finditer(text):
        yield match.span("value")


# --- Tokens and keys with a known shape ---------------------------------------------------
_KNOWN_TOKEN = re.compile(
    r"""(?<![\w-])(?:
        sk-(?=[\w-]*\d)[\w-]{20,}                 # OpenAI / Anthropic style secret keys
      | (?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}  # Stripe
      | gh[pousr]_[A-Za-z0-9]{30,}                # GitHub tokens
      | github_pat_\w{30,}                        # GitHub fine-grained tokens
      | xox[abprs]-[A-Za-z0-9-]{10,}              # Slack
      | (?:AKIA|ASIA)[A-Z0-9]{16}                 # AWS access key ids
      | AIza[\w-]{35}                             # Google API keys
      | glpat-[\w-]{20,}                          # GitLab
      | npm_[A-Za-z0-9]{36}                       # npm
      | whsec_[A-Za-z0-9+/=]{20,}                 # webhook signing secrets (ours too)
      | eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*        # JWT: header.payload.signature
    )(?![\w-])""",
    re.X,
)


def _known_tokens(text: str) -> Iterator[Span]:
    for match in _KNOWN_TOKEN.finditer(text):
        yield match.span()


# --- PEM private keys ---------------------------------------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[^\x00\[\]]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
)


def _private_keys(text: str) -> Iterator[Span]:
    for match in _PRIVATE_KEY.finditer(text):
        yield match.span()


# --- key=value / key: value secrets -------------------------------------------------------
# The key ends with one of these words (DB_PASSWORD, oauth_token, x-api-key); whatever comes
# before it is part of the key, so the search starts at the word itself.
_SECRET_KEY = re.compile(
    r"""(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey
          |access[_-]?key|private[_-]?key|client[_-]?secret|auth|credentials?)
        ["']?\s*(?P<sep>=>|:=|=|:(?!:))[ \t]*
        (?:"(?P<double>(?:(?!\[[A-Z_]+\])[^"\n\x00])+)"        # a placeholder inside ends the value,
          |'(?P<single>(?:(?!\[[A-Z_]+\])[^'\n\x00])+)'        # as a blanked finding does
          |(?P<bare>[^\s,;&"'<>(){}\[\]\x00]+))""",
    re.I | re.X,
)
# Every key above holds one of these: a quick test before the full pattern.
_SECRET_WORD = re.compile(r"pass|pwd|secret|token|key|auth|credential", re.I)
# "Reset your password: visit the page" is prose, not a secret: a plain lowercase word
# after a colon with more words on the line. Blanked text counts as more words, which keeps
# the verdict the same once a later finding has become a placeholder.
_PROSE_AFTER_COLON = re.compile(r"[a-z]+[ \t]+\S")


def _key_value_secrets(text: str) -> Iterator[Span]:
    if not (("=" in text or ":" in text) and _SECRET_WORD.search(text)):
        return
    for match in _checked_matches(_SECRET_KEY, text, _is_not_prose):
        value = next(name for name in ("bare", "double", "single") if match[name] is not None)
        yield match.span(value)


def _is_not_prose(match: re.Match) -> bool:
    if match["bare"] is None or match["sep"] != ":":
        return True
    return not _PROSE_AFTER_COLON.match(match.string, match.start("bare"))


# --- Emails -------------------------------------------------------------------------------
# The local part covers letters, digits and ._%+- : RFC 5322 allows = / ? & too, but then
# "email=ada@example.com" would swallow its "email=".
_EMAIL = re.compile(
    r"""(?<![\w%+.-])[\w%+-]+(?:\.[\w%+-]+)*
        @(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:xn--[a-z0-9-]{1,59}|[a-z]{2,63})(?![a-z0-9])""",
    re.I | re.X | re.A,
)


def _emails(text: str) -> Iterator[Span]:
    if "@" not in text:
        return
    for match in _EMAIL.finditer(text):
        yield match.span()


# --- Payment cards ------------------------------------------------------------------------
# Grouped forms keep one separator throughout, so a date followed by digits never joins up.
_CARD = re.compile(
    r"""(?<![\d+])(?:                                  # not inside a bigger number or after +country
        \d{13,19}
      | \d{4}(?P<s1>[ -])\d{4}(?P=s1)\d{4}(?P=s1)\d{4}    # 4-4-4-4
      | \d{4}(?P<s2>[ -])\d{6}(?P=s2)\d{4,5}             # 4-6-5 (Amex), 4-6-4 (Diners)
    )(?!\d)""",
    re.X,
)


def _cards(text: str) -> Iterator[Span]:
    if not _FOUR_DIGITS.search(text):
        return
    for match in _checked_matches(_CARD, text, _is_card_number):
        yield match.span()


def _is_card_number(match: re.Match) -> bool:
    digits = [int(c) for c in match[0] if c.isdigit()]
    # Issuer digits 2-6 (Mastercard, Amex/Diners/JCB, Visa, Mastercard/Maestro,
    # Discover/UnionPay): a Luhn check alone passes one random digit run in ten.
    return 2 <= digits[0] <= 6 and _luhn_valid(digits)


def _luhn_valid(digits: list[int]) -> bool:
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


# --- US social security numbers -----------------------------------------------------------
# Not after "+" and a country code: "+992 372 12 3456" is a Tajik phone number.
_SSN = re.compile(
    r"(?<![\d+-])(?<!\+\d )(?<!\+\d\d )(?<!\+\d\d\d )"
    r"(?P<area>\d{3})(?P<sep>[- ])(?P<group>\d{2})(?P=sep)(?P<serial>\d{4})(?![\d-])"
)
_LABELED_SSN = re.compile(r"\b(?:ssn|social security(?: number| no\.?)?)\W{0,3}(?P<digits>\d{9})(?!\d)", re.I)


def _ssns(text: str) -> Iterator[Span]:
    if not _FOUR_DIGITS.search(text):
        return
    for match in _checked_matches(_SSN, text, lambda m: _valid_ssn(m["area"], m["group"], m["serial"])):
        yield match.span()
    for match in _checked_matches(_LABELED_SSN, text, lambda m: _valid_ssn(*_ssn_parts(m["digits"]))):
        yield match.span("digits")


def _ssn_parts(digits: str) -> tuple[str, str, str]:
    return digits[:3], digits[3:5], digits[5:]


def _valid_ssn(area: str, group: str, serial: str) -> bool:
    # The SSA never issues area 000, 666 or 900-999, group 00 or serial 0000.
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


# --- IP addresses -------------------------------------------------------------------------
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
_IPV6 = re.compile(
    r"""(?<![\w:.])
        (?=[0-9a-f]*:[0-9a-f]*:)                        # at least two colons
        [0-9a-f:]+(?:(?<=:)(?:\d{1,3}\.){3}\d{1,3})?    # hex groups, maybe an IPv4 tail
        (?:%[\w-]+(?:\.[\w-]+)*)?                       # zone id: fe80::1%eth0
        (?![\w:]|\.\d)""",
    re.I | re.X,
)


def _ipv4_addresses(text: str) -> Iterator[Span]:
    for match in _checked_matches(_IPV4, text, lambda m: all(int(octet) <= 255 for octet in m[0].split("."))):
        yield match.span()


def _ipv6_addresses(text: str) -> Iterator[Span]:
    if ":" not in text:
        return
    for match in _checked_matches(_IPV6, text, lambda m: _plausible_ipv6(m[0].split("%")[0])):
        yield match.span()


def _plausible_ipv6(candidate: str) -> bool:
    try:
        ipaddress.IPv6Address(candidate)
    except ValueError:
        return False
    # Compressed forms with only short groups are more often code than addresses:
    # the slice in `items[1::2]` is a valid IPv6 address. Loopback is the exception.
    groups = [group for group in re.split(r"[:.]", candidate) if group]
    return "::" not in candidate or candidate == "::1" or any(len(group) >= 3 for group in groups)


# --- Phone numbers ------------------------------------------------------------------------
# libphonenumber's matcher costs a few hundred microseconds a run, so it only reads what
# could be a number, with one character around it (the matcher turns down a number glued
# to a letter): "+" and at least seven digits, or the shape of a US number, since a number
# without "+country" is read as one (area code and exchange never start with 0 or 1).
_PHONE_CANDIDATE = re.compile(
    r"""\+[\s(]*\d(?:[\s().\-/]*\d){6,}
      | (?<!\d)(?:1[\s.\-]?)?\(?[2-9]\d\d\)?[\s.\-]?[2-9]\d\d[\s.\-]?\d{4}(?!\d)""",
    re.X,
)
_STRICT_GROUPING = phonenumbers.Leniency.STRICT_GROUPING


def _phones(text: str) -> Iterator[Span]:
    for candidate in _PHONE_CANDIDATE.finditer(text):
        offset = max(candidate.start() - 1, 0)
        window = text[offset : candidate.end() + 1]
        # STRICT_GROUPING: valid digits are not enough, they must be grouped the way their
        # country writes them.
        for match in phonenumbers.PhoneNumberMatcher(window, settings.PHONE_DEFAULT_REGION, leniency=_STRICT_GROUPING):
            raw = match.raw_string
            # The matcher takes an opening bracket that wraps the whole number, as in
            # "(+44 20 7946 0958)"; it belongs to the prose, like the closing one it leaves.
            skip = len(raw) - len(raw[1:].lstrip()) if raw.startswith("(") and ")" not in raw else 0
            yield offset + match.start + skip, offset + match.end


# --- Long random-looking strings ----------------------------------------------------------
_TOKEN_CANDIDATE = re.compile(r"(?<![\w+=-])[\w+=-]{32,}(?![\w+=-])", re.A)
_HEX_OR_UUID = set("0123456789abcdefABCDEF-")
_SEPARATORS = re.compile(r"[_+=-]")
_WORDISH = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{4,}")


def _random_looking_tokens(text: str) -> Iterator[Span]:
    for match in _checked_matches(_TOKEN_CANDIDATE, text, lambda m: _looks_random(m[0])):
        yield match.span()


def _looks_random(candidate: str) -> bool:
    if set(candidate) <= _HEX_OR_UUID:
        return False  # digests, commit ids and UUIDs identify things, they are not secrets
    classes = sum(
        (any(c.isupper() for c in candidate), any(c.islower() for c in candidate), any(c.isdigit() for c in candidate))
    )
    if classes < 2 or _reads_like_a_name(_SEPARATORS.sub("", candidate)):
        return False
    return _entropy(candidate) >= 3.5


def _reads_like_a_name(letters_and_digits: str) -> bool:
    """Names in code and slugs (getUserProfileByIdV2, MAX_RETRY_ATTEMPTS, how-to-configure-v2)
    are mostly word-like runs and seldom switch between lower case, upper case and digits;
    a random string switches at about six characters in ten. Measured on random base62
    strings of 32-64 characters, 0.08% read as names."""
    length = len(letters_and_digits)
    words = sum(len(word) for word in _WORDISH.findall(letters_and_digits))
    switches = sum(_char_class(a) != _char_class(b) for a, b in itertools.pairwise(letters_and_digits))
    return words >= 0.7 * length and switches < 0.4 * (length - 1)


def _char_class(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2


def _entropy(candidate: str) -> float:
    length = len(candidate)
    return -sum(count / length * math.log2(count / length) for count in Counter(candidate).values())


# Priority order: see the module docstring for why each comes where it does.
_DETECTORS: tuple[tuple[str, Callable[[str], Iterator[Span]]], ...] = (
    ("URL_CREDENTIALS", _url_credentials),
    ("SECRET", _private_keys),
    ("TOKEN", _authorization_values),
    ("TOKEN", _bearer_tokens),
    ("TOKEN", _known_tokens),
    ("SECRET", _key_value_secrets),
    ("EMAIL", _emails),
    ("CARD", _cards),
    ("IP", _ipv6_addresses),  # before IPv4, which would take the tail of ::ffff:192.0.2.1
    ("IP", _ipv4_addresses),
    ("SSN", _ssns),
    ("PHONE", _phones),  # last but one: libphonenumber is the costly step, so it sees the least text
    ("TOKEN", _random_looking_tokens),
)

"""The client's IP address, as the outermost of our trusted proxies saw it. One rule for every caller:
throttles, intake (Lead.client_ip, reCAPTCHA's remoteip), the chat relay, admin login lockout and logs.

With TRUSTED_PROXY_COUNT = N proxies in front of the app, each appends the
address it received the connection from to X-Forwarded-For, so the N-th entry
from the right is what our outermost proxy saw; anything left of it was written
by the client and is ignored (a client cannot choose its identity by sending a
longer header). With N = 0 it is the socket's peer (REMOTE_ADDR) and the header
is ignored altogether. A header shorter than N (a request that skipped a
proxy) gives its leftmost entry, as DRF's NUM_PROXIES does.

Written here rather than with python-ipware: ipware picks the first public
address it can find in several headers, which is exactly the address a client
can write itself; the rule above needs only the proxy count.
"""

import ipaddress

from django.conf import settings
from rest_framework.exceptions import ValidationError


def _address(value: str) -> str | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.partition(":")[0]
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def client_ip(request) -> str | None:
    """The client's address as text (normalised), or None when there is no valid one."""
    meta = request.META
    proxies = settings.TRUSTED_PROXY_COUNT
    forwarded = [entry for entry in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if entry.strip()]
    if proxies and forwarded:
        return _address(forwarded[-min(proxies, len(forwarded))])
    return _address(meta.get("REMOTE_ADDR", ""))


def client_ip_bucket(request) -> str | None:
    """What rate limits count per: the address for IPv4, its /64 network for IPv6 (one subscriber's block)."""
    ip = client_ip(request)
    return None if ip is None else address_bucket(ip)


def address_bucket(ip: str) -> str:
    """client_ip_bucket's rule for an address already known valid (a socket's peer, client_ip's answer)."""
    address = ipaddress.ip_address(ip)
    if address.version == 4:
        return ip
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))


def client_ip_for_axes(request) -> str | None:
    """django-axes' AXES_CLIENT_IP_CALLABLE: lockouts count per the same bucket as the throttles."""
    return client_ip_bucket(request)


# X-User-IP as the schema states it (reported_user_ip checks it): an IPv4 or IPv6 address as sent (no spaces,
# no zone), or empty for "unknown".
USER_IP_SCHEMA = {"anyOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "ipv6"},
                            {"type": "string", "maxLength": 0}]}  # fmt: skip


def reported_user_ip(request) -> str | None:
    """X-User-IP as the trusted chat agent sends it: the visitor's address, validated."""
    reported = request.headers.get("X-User-IP", "")
    if not reported:
        return None
    try:
        if "%" in reported:  # a zone id ("fe80::1%eth0") names an interface of the agent, not the visitor
            raise ValueError(reported)
        return str(ipaddress.ip_address(reported))
    except ValueError as exc:
        raise ValidationError({"X-User-IP": ["Enter a valid IPv4 or IPv6 address."]}) from exc


def visitor_ip(request, *, trusted_chat: bool) -> str | None:
    """The visitor's IP: as the trusted chat agent reports it, else as seen through our proxies."""
    reported = reported_user_ip(request)  # a malformed header is refused, whoever sent it
    if trusted_chat and reported:
        return reported
    return client_ip(request)

"""Render the nginx site and the systemd units of deploy/ for one host (docs/deploy.md):

    .venv/bin/python deploy/render.py OUT --server-name leads.example.com --tls-cert CERT --tls-key KEY

writes OUT/nginx/leadgen.conf and OUT/systemd/*. The templates' placeholders are `${NAME}` (braced, upper
case) and nothing else: nginx's `$host` and systemd's `$CELERY_CONCURRENCY` pass through as they are. A
placeholder without a value is an error, so a template and this script cannot drift apart unnoticed.
"""

import argparse
import os
import re
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent
PROJECT = DEPLOY.parent
PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")

# Every unit's sandbox. The processes write nothing to disk but temporary files (a private /tmp) and the
# supervisord pidfile there; `collectstatic` into STATIC_ROOT runs as a deploy step, not under a unit.
HARDENING = """\
NoNewPrivileges=true
PrivateTmp=true
ProtectSystem=strict
ProtectHome=read-only
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectKernelLogs=true
ProtectControlGroups=true
ProtectClock=true
ProtectHostname=true
RestrictSUIDSGID=true
RestrictNamespaces=true
RestrictRealtime=true
LockPersonality=true
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
UMask=0027"""

REDIRECT_SERVER = """
# Plain HTTP only redirects to the site.
server {{
{listen}
    server_name {server_name};
    server_tokens off;
    return 301 https://$host$request_uri;
}}
"""


def render(template: str, values: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        if match[1] not in values:
            raise KeyError(f"no value for the placeholder ${{{match[1]}}}")
        return values[match[1]]

    return PLACEHOLDER.sub(value, template)


def host_and_port(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{address!r} is not HOST:PORT")
    return host, port


def site_values(args) -> dict[str, str]:
    tls = bool(args.tls_cert)
    listen = args.listen or (["443", "[::]:443"] if tls else ["80", "[::]:80"])
    flags = " ssl http2" if tls else ""
    lines = [f"listen {address}{flags};" for address in listen]
    if tls:
        lines += [f"ssl_certificate {args.tls_cert};", f"ssl_certificate_key {args.tls_key};"]
    redirect = ""
    if tls:
        plain = "\n".join(f"    listen {address};" for address in args.redirect_listen)
        redirect = REDIRECT_SERVER.format(listen=plain, server_name=args.server_name)
    return {
        "SERVER_NAME": args.server_name,
        "LISTEN": "\n    ".join(lines),
        "REDIRECT_SERVER": redirect,
        "WEB_ADDRESS": args.web,
        "MCP_ADDRESS": args.mcp,
        "STATIC_ROOT": str(Path(args.static_root).resolve()),
        "METRICS_ALLOW": "\n        ".join(f"allow {address};" for address in args.metrics_allow),
    }


def unit_values(args) -> dict[str, str]:
    web_host, web_port = host_and_port(args.web)
    mcp_host, mcp_port = host_and_port(args.mcp)
    return {
        "PROJECT": str(Path(args.project).resolve()),
        "USER": args.user,
        "GROUP": args.group or args.user,
        "ENV_FILE": args.env_file,
        "WEB_HOST": web_host,
        "WEB_PORT": web_port,
        "WEB_PROCESSES": str(args.web_processes),
        "MCP_ADDRESS": args.mcp,
        "MCP_HOST": mcp_host,
        "MCP_PORT": mcp_port,
        "HARDENING": HARDENING,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("out", type=Path, help="directory to write nginx/ and systemd/ into")
    add("--server-name", required=True, help="the site's host name (nginx server_name)")
    add("--listen", action="append", help="nginx listen address, repeatable (80, [::]:80; with TLS 443, [::]:443)")
    add("--tls-cert", help="certificate chain file: nginx terminates TLS, and plain HTTP is redirected")
    add("--tls-key", help="its private key")
    add("--redirect-listen", action="append", help="with TLS: where plain HTTP is redirected from (80, [::]:80)")
    add("--web", default="127.0.0.1:8000", help="HOST:PORT of the web processes' socket (IPv4)")
    add("--mcp", default="127.0.0.1:8300", help="HOST:PORT of the MCP server")
    add("--static-root", default=str(PROJECT / "var" / "static"), help="STATIC_ROOT, DATA_DIR/static")
    add("--metrics-allow", action="append", help="address or CIDR allowed /metrics, repeatable (127.0.0.1, ::1)")
    add("--project", default=str(PROJECT), help="the checkout, with its .venv")
    add("--user", default="leadgen", help="user the units run as")
    add("--group", help="their group (the user's name)")
    add("--env-file", default="/etc/leadgen/env", help="the units' EnvironmentFile")
    add("--web-processes", type=int, default=os.cpu_count(), help="default WEB_PROCESSES (this host's cores)")
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    args.redirect_listen = args.redirect_listen or ["80", "[::]:80"]
    args.metrics_allow = args.metrics_allow or ["127.0.0.1", "::1"]
    for address in (args.web, args.mcp):
        try:
            host_and_port(address)
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))

    written = []
    site, units = site_values(args), unit_values(args)
    for folder, values in (("nginx", site), ("systemd", units)):
        (args.out / folder).mkdir(parents=True, exist_ok=True)
        for template in sorted((DEPLOY / folder).iterdir()):
            target = args.out / folder / template.name
            target.write_text(render(template.read_text(), values))
            written.append(target)
    print("\n".join(str(path) for path in written))


if __name__ == "__main__":
    main()

"""deploy/'s templates as deploy/render.py renders them: the nginx site's limits are the web processes' own
(foundation/limits.py, the settings), the site passes `nginx -t` with and without TLS, and the systemd units
pass `systemd-analyze verify` with the checkout's real paths."""

import os
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import URLResolver, get_resolver
from django.urls.resolvers import RoutePattern

from foundation.limits import body_limit
from standins.mailbox import make_self_signed_certificate
from tests.deploy.conftest import PROJECT

SITE = PROJECT / "deploy/nginx/leadgen.conf"
UNITS = [f"leadgen-{name}.service" for name in ("web", "worker", "beat", "mcp")] + ["leadgen.target"]
LOCATION = re.compile(r"location\s+(=|~)?\s*(\S+)\s*\{([^{}]*)\}")
SAMPLE = {"str": "sample", "uuid": "00000000-0000-4000-8000-000000000000", "int": "1", "slug": "sample", "path": "a/b"}


def nginx_size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([km]?)", value).groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024 * 1024}[unit]


def directive(block: str, name: str) -> str | None:
    found = re.search(rf"^\s*{name}\s+([^;]+);", block, re.MULTILINE)
    return found[1] if found else None


def web_locations(site: str) -> list[tuple[str, str, str]]:
    """(kind, pattern, body) of each location proxied to the web processes."""
    return [found for found in LOCATION.findall(site) if "proxy_pass http://leadgen_web;" in found[2]]


def nginx_body_limit(site: str, path: str) -> int:
    """The client_max_body_size nginx applies to `path`: an exact location, else the first matching regex, else
    the longest matching prefix, else the server's."""
    locations = web_locations(site)
    server = nginx_size(directive(site.split("location", 1)[0], "client_max_body_size"))
    chosen = next((body for kind, pattern, body in locations if kind == "=" and pattern == path), None)
    if chosen is None:
        chosen = next((body for kind, pattern, body in locations if kind == "~" and re.search(pattern, path)), None)
    if chosen is None:
        prefixes = [(pattern, body) for kind, pattern, body in locations if not kind and path.startswith(pattern)]
        chosen = max(prefixes, default=("", ""), key=lambda entry: len(entry[0]))[1]
    own = directive(chosen, "client_max_body_size")
    return nginx_size(own) if own else server


def django_paths(patterns=None, prefix: str = ""):
    """A path for each route of the URL conf, its converters filled with samples (regex routes left out)."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if not isinstance(entry.pattern, RoutePattern):
            continue
        route = prefix + re.sub(r"<(?:(\w+):)?\w+>", lambda found: SAMPLE[found[1] or "str"], str(entry.pattern))
        if isinstance(entry, URLResolver):
            yield from django_paths(entry.url_patterns, route)
        else:
            yield "/" + route


def test_every_route_has_the_same_body_limit_in_nginx_as_in_the_web_process():
    site = SITE.read_text()
    paths = set(django_paths())
    assert {"/api/leads", "/api/chat/stream", "/api/sources/sample/webhook"} <= paths
    differ = {path: (nginx_body_limit(site, path), body_limit(path)) for path in paths}
    differ = {path: sizes for path, sizes in differ.items() if sizes[0] != sizes[1]}
    assert not differ, f"(nginx, web process) body limits differ: {differ}"


def test_the_mcp_body_limit_and_the_head_deadline_are_the_settings():
    site = SITE.read_text()
    (mcp,) = [body for _, pattern, body in LOCATION.findall(site) if pattern == "/mcp"]
    assert nginx_size(directive(mcp, "client_max_body_size")) == settings.MCP_MAX_REQUEST_BYTES
    assert directive(site, "client_header_timeout") == f"{settings.REQUEST_HEAD_TIMEOUT_SECONDS:g}s"
    assert directive(site, "client_body_timeout") == f"{settings.REQUEST_BODY_TIMEOUT_SECONDS:g}s"


def render(out: Path, *args: str) -> None:
    subprocess.run([str(PROJECT / ".venv/bin/python"), str(PROJECT / "deploy/render.py"), str(out), *args],
                   check=True, capture_output=True)  # fmt: skip


def nginx_test(tmp_path: Path) -> subprocess.CompletedProcess:
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
pid {tmp_path / "nginx.pid"};
events {{}}
http {{
    include /etc/nginx/mime.types;
    include {tmp_path / "out/nginx/leadgen.conf"};
}}
""")
    return subprocess.run(["nginx", "-t", "-q", "-e", "stderr", "-p", str(tmp_path), "-c", str(conf)],
                          capture_output=True, text=True)  # fmt: skip


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_the_rendered_site_passes_nginx_t(tmp_path, tls):
    args = ["--server-name", "leads.example.com", "--listen", "127.0.0.1:8443", "--static-root", str(tmp_path)]
    if tls:
        make_self_signed_certificate(tmp_path / "cert.pem", tmp_path / "key.pem")
        args += ["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"),
                 "--redirect-listen", "127.0.0.1:8080"]  # fmt: skip
    render(tmp_path / "out", *args)
    checked = nginx_test(tmp_path)
    assert checked.returncode == 0, checked.stderr
    site = (tmp_path / "out/nginx/leadgen.conf").read_text()
    assert "${" not in site
    assert ("ssl_certificate" in site and "return 301 https://" in site) is tls


def test_the_systemd_units_pass_systemd_analyze_verify(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("SECRET_KEY=x\n")
    render(tmp_path / "out", "--server-name", "leads.example.com", "--project", str(PROJECT),
           "--env-file", str(env_file), "--web-processes", "3")  # fmt: skip
    units = [tmp_path / "out/systemd" / name for name in UNITS]
    assert sorted(path.name for path in (tmp_path / "out/systemd").iterdir()) == sorted(UNITS)
    checked = subprocess.run(["systemd-analyze", "verify", *map(str, units)], capture_output=True, text=True)
    assert checked.returncode == 0 and not checked.stdout + checked.stderr, checked.stdout + checked.stderr
    web = (tmp_path / "out/systemd/leadgen-web.service").read_text()
    assert f"-c {PROJECT}/deploy/supervisor/web.conf" in web and "WEB_PROCESSES=3" in web

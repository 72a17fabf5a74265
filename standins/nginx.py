"""The real nginx with the site deploy/render.py renders, in a folder of its own, for the deploy tests and the
benchmarks: `configure()` renders the site and the main configuration Debian's /etc/nginx/nginx.conf would
give it, and returns the command that runs nginx in the foreground; the caller starts and stops the process.
"""

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
TEMP_KINDS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def configure(prefix: Path, *, port: int, web: str, static_root: Path | None = None, mcp: str | None = None,
              metrics_allow: str | None = None, worker_connections: int = 512) -> list[str]:
    """The site for the web socket `web` (and the MCP server's `mcp`, both HOST:PORT) listening on
    127.0.0.1:`port`, rendered under `prefix`; the command that serves it."""
    static_root = static_root or prefix / "static"
    static_root.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(PROJECT / "deploy/render.py"), str(prefix / "out"), "--server-name", "localhost",
               "--listen", f"127.0.0.1:{port}", "--web", web, "--static-root", str(static_root)]  # fmt: skip
    if mcp:
        command += ["--mcp", mcp]
    if metrics_allow:
        command += ["--metrics-allow", metrics_allow]
    subprocess.run(command, check=True, capture_output=True)
    temp = "\n".join(f"    {kind}_temp_path {prefix / kind};" for kind in TEMP_KINDS)
    (prefix / "nginx.conf").write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections {worker_connections}; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
{temp}
    include {prefix / "out/nginx/leadgen.conf"};
}}
""")
    return ["nginx", "-e", "stderr", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"]

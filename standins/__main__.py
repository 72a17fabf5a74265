"""Every stand-in at once, as `make run` starts them (scripts/run).

    python -m standins --data var --product-url http://127.0.0.1:8000 --env-file var/standins.env

Each stand-in listens on a free loopback port. Once all of them listen, the settings that point the
product at them (each one's `settings()`, plus STANDINS_URL, the inbox page) are written to the env
file, shell-quoted, for scripts/run to load before it starts the product. Then it serves until
SIGINT or SIGTERM and stops every stand-in (dovecot included).
"""

import argparse
import os
import shlex
import signal
import threading
from pathlib import Path

from standins.agent import Agent
from standins.auth0 import Auth0
from standins.base import StandIn
from standins.clickup import ClickUp
from standins.crm_receiver import CrmReceiver
from standins.graph_api import GraphApi
from standins.inbox import Inbox
from standins.kapa import Kapa
from standins.llm import Llm
from standins.mailbox import Mailbox
from standins.mailgun import Mailgun
from standins.pipedrive import Pipedrive
from standins.recaptcha import Recaptcha
from standins.v0 import V0, demo_behaviour
from standins.wordpress import WordPress


def make_run_stand_ins(data: Path, product_url: str) -> list[StandIn]:
    """One of each, with the defaults that make the demo's flows work end to end."""
    return [
        Mailgun(),
        Pipedrive(),
        ClickUp(),
        Llm(),
        Recaptcha(),
        V0(demo_behaviour()),
        CrmReceiver(),
        Agent(demo=True, product_url=product_url, delay=0.03),
        WordPress(demo=True),
        Kapa(demo=True),
        Auth0(),
        GraphApi(invent_leads=True),
        Mailbox(data / "mailbox"),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Start a local stand-in for every outside service.")
    parser.add_argument("--data", type=Path, default=Path("var"), help="where kept data lives (the demo mailbox)")
    parser.add_argument("--product-url", default="http://127.0.0.1:8000", help="the product's address")
    parser.add_argument("--env-file", type=Path, required=True, help="where to write the settings")
    parser.add_argument("--port", type=int, default=0, help="the inbox page's port (default: a free one)")
    args = parser.parse_args(argv)

    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())

    started: list[StandIn] = []
    inbox = None
    try:
        for stand_in in make_run_stand_ins(args.data, args.product_url.rstrip("/")):
            started.append(stand_in.start())
            print(f"stand-in {stand_in.name} started", flush=True)
        inbox = Inbox(started, port=args.port, admin_url=f"{args.product_url.rstrip('/')}/admin/").start()
        values = {"STANDINS_URL": inbox.url}
        for stand_in in started:
            values.update(stand_in.settings())
        written = args.env_file.with_suffix(".tmp")
        written.write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in values.items()))
        os.replace(written, args.env_file)  # scripts/run waits for the file: it appears whole
        print(f"stand-ins' inbox at {inbox.url}", flush=True)
        stopping.wait()
    finally:
        if inbox is not None:
            inbox.stop()
        for stand_in in reversed(started):
            stand_in.stop()


if __name__ == "__main__":
    main()

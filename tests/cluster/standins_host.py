"""The outside services of the cluster, on their own host: the stand-ins the web and worker hosts call, and a
read endpoint of everything they created.

    python -m tests.cluster.standins_host --host 10.231.0.4 --env-file FILE [--records-port 9000] ...

Starts Pipedrive, ClickUp, Mailgun, the LLM gateway, V0, the sales agent and reCAPTCHA on `--host` (free ports), writes
the settings that point the product at them to FILE (KEY=value lines, once all of them listen), serves
`GET /records.json` on `--records-port` and runs until SIGTERM or SIGINT. The inbox page of `python -m
standins` shows the latest 500 items of each stand-in; a run of thousands of leads needs every record: the
identity of each (a person's email, an organization's name, a lead's origin_id, a note's reference, a task's
heading and link, an email's Message-ID, a V0 chat's leadKey) and each stand-in's count of duplicates.
"""

import argparse
import json
import os
import signal
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from standins.agent import Agent
from standins.clickup import ClickUp, task_identity
from standins.llm import Llm
from standins.mailgun import Mailgun
from standins.pipedrive import Pipedrive, note_identity
from standins.recaptcha import Recaptcha
from standins.v0 import V0, Behaviour

ANSWER = [f"word{n} " for n in range(20)]  # the agent's answer, one token each


def records(pipedrive: Pipedrive, clickup: ClickUp, mailgun: Mailgun, v0: V0, agent: Agent) -> dict:
    return {
        "persons": [person["email"][0]["value"] for person in list(pipedrive.persons)],
        "organizations": [org["name"] for org in list(pipedrive.organizations)],
        "leads": [lead["origin_id"] for lead in list(pipedrive.leads)],
        "notes": [note_identity(note) for note in list(pipedrive.notes)],
        "tasks": [list(task_identity(task)) for task in list(clickup.tasks)],
        "emails": [[m["message_id"], m["subject"], *m["to"]] for m in list(mailgun.messages)],
        "v0_chats": dict(Counter(chat.metadata.get("leadKey") for chat in list(v0.chats.values()))),
        "agent_runs": len(agent.runs),
        "agent_answer": agent.full_answer,
        "duplicates": {
            "pipedrive": pipedrive.duplicates(),
            "clickup": clickup.duplicates(),
            "mailgun": mailgun.duplicates(),
        },
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="The cluster's stand-ins and a read endpoint of their records.")
    parser.add_argument("--host", required=True)
    parser.add_argument("--env-file", type=Path, required=True)
    parser.add_argument("--records-port", type=int, default=9000)
    parser.add_argument("--v0-parts", type=int, default=10, help="part frames of a generation")
    parser.add_argument("--v0-interval", type=float, default=0.5, help="seconds between part frames")
    parser.add_argument("--v0-finish-after", type=float, default=6.0, help="a generation ends by then, watched or not")
    parser.add_argument("--agent-delay", type=float, default=0.1, help="seconds between the agent's tokens")
    args = parser.parse_args(argv)

    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    host = args.host
    behaviour = Behaviour(parts=args.v0_parts, frame_interval=args.v0_interval, finish_after=args.v0_finish_after)
    pipedrive, clickup, mailgun = Pipedrive(host=host), ClickUp(host=host), Mailgun(host=host)
    v0, llm = V0(behaviour, host=host), Llm(host=host)
    agent = Agent(tokens=ANSWER, delay=args.agent_delay, host=host)
    recaptcha = Recaptcha(hostnames=["localhost"], host=host)  # any token passes, for the page at localhost
    started = [stand_in.start() for stand_in in (pipedrive, clickup, mailgun, llm, v0, agent, recaptcha)]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path != "/records.json":
                self.send_error(404)
                return
            body = json.dumps(records(pipedrive, clickup, mailgun, v0, agent)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, args.records_port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    values = {}
    for stand_in in started:
        values.update(stand_in.settings())
    written = args.env_file.with_suffix(".tmp")
    written.write_text("".join(f"{name}={value}\n" for name, value in values.items()))
    os.replace(written, args.env_file)  # whole or not at all: the harness waits for it
    print(f"stand-ins on {host}, records at http://{host}:{args.records_port}/records.json", flush=True)
    try:
        stopping.wait()
    finally:
        server.shutdown()
        for stand_in in reversed(started):
            stand_in.stop()


if __name__ == "__main__":
    main()

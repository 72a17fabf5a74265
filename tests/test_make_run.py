"""`make run` as a new user runs it: local PostgreSQL and Redis kept under its data directory, a stand-in
for every outside service, the demo office, and every process of the Procfile.

The system is started once for the module: the smoke test checks what it prints and that a job runs
end to end; the tour (tests/test_tour_browser.py style, in the same module so the start is paid once)
walks what the README's tour shows.
"""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
import requests

from tests.conftest import free_port

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).resolve().parent.parent


def wait_for(condition, *, timeout, message):
    """`message` is text, or a function that words it when the wait has failed (what a log holds by then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if result := condition():
                return result
        except (requests.ConnectionError, requests.Timeout, psycopg.OperationalError, FileNotFoundError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {message() if callable(message) else message}")


class RunningSystem:
    def __init__(self, process, base, output: Path, data: Path):
        self.process, self.base, self.output, self.data = process, base, output, data

    def printed(self) -> str:
        return self.output.read_text()

    def database(self):
        """The kept cluster's port is in its pid file (line 4), as PostgreSQL writes it."""
        port = (self.data / "services" / "pgdata" / "postmaster.pid").read_text().splitlines()[3]
        return psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/leadgen", autocommit=True)

    def standins_url(self) -> str:
        return re.search(r"Stand-ins:\s+(\S+)", self.printed()).group(1)


def start(tmp_path, port) -> RunningSystem:
    # As a new user runs it: none of the suite's own servers.
    ours = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}
    env = {k: v for k, v in os.environ.items() if k not in ours and not k.startswith("WITH_SERVICES")}
    # The mailbox polled every 10 s, not the demo's minute: the tour waits for an email lead on a busy host.
    # One web process and one worker child: the suite's other workers share the cores.
    env.update(DATA_DIR=str(tmp_path / "data"), CELERY_CONCURRENCY="1", WEB_PROCESSES="1", IMAP_POLL_SECONDS="10")
    output = tmp_path / "make-run.log"
    with output.open("w") as log:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    system = RunningSystem(process, f"http://127.0.0.1:{port}", output, tmp_path / "data")

    def printed() -> str:
        return output.read_text()[-4000:]

    def ready():
        if process.poll() is not None:
            raise AssertionError(f"make run exited ({process.returncode}); it printed:\n{printed()}")
        return requests.get(f"{system.base}/readyz", headers={"Accept": "application/json"}, timeout=5).ok

    wait_for(ready, timeout=300, message=lambda: f"/readyz to answer; make run printed:\n{printed()}")
    return system


def stop(system: RunningSystem) -> None:
    """Ctrl-C, as a user stops it: every process ends."""
    if system.process.poll() is None:
        os.killpg(system.process.pid, signal.SIGINT)
        try:
            system.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(system.process.pid, signal.SIGKILL)
            system.process.wait(timeout=10)
            raise


@pytest.fixture(scope="module")
def running_system(tmp_path_factory):
    system = start(tmp_path_factory.mktemp("make-run"), free_port())
    try:
        yield system
    finally:
        if system.process.poll() is None:
            os.killpg(system.process.pid, signal.SIGKILL)
            system.process.wait(timeout=10)


def test_make_run_starts_everything_and_runs_a_job(running_system):
    base = running_system.base
    ready = requests.get(f"{base}/readyz", headers={"Accept": "application/json"}, timeout=5)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ok"}, "anonymous callers get the status alone"
    printed = running_system.printed()
    assert "demo / demo-password" in printed
    assert f"{base}/admin/" in printed
    # Every page says the outside services are stand-ins, and links to what they received.
    assert "nothing leaves this machine" in requests.get(f"{base}/", timeout=10).text
    assert requests.get(running_system.standins_url(), timeout=10).status_code == 200

    # Through the web process, as an operator: log in and press "Send test job".
    browser = requests.Session()
    browser.get(f"{base}/admin/login/", timeout=10)
    login = browser.post(
        f"{base}/admin/login/?next=/admin/",
        data={"username": "demo", "password": "demo-password", "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        timeout=10,
    )
    assert login.url.endswith("/admin/"), "login failed"
    sent = browser.post(
        f"{base}/admin/jobs/job/send-test-job/",
        data={"csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        timeout=10,
    )
    job_id = int(re.search(r"/admin/jobs/job/(\d+)/change/", sent.url).group(1))

    def job_succeeded():
        with running_system.database() as db:
            return db.execute("SELECT status FROM jobs_job WHERE id = %s", [job_id]).fetchone()[0] == "succeeded"

    wait_for(job_succeeded, timeout=60, message="the worker to run the test job")
    printed = running_system.printed()
    for name in ("web", "worker", "beat", "mcp"):
        assert f"{name}.1 started" in printed, f"{name} did not start"
    # One JSON line per request (no terminal here): no request_started line, no daphne access line.
    login_page = [line for line in printed.splitlines() if "GET /admin/login/" in line]
    assert len(login_page) == 1 and '"event": "request_finished"' in login_page[0], login_page
    assert "jobs.sweep" in printed, "beat sends the sweep"


SHOTS = PROJECT / "var" / "screenshots" / "tour"


def received(system: RunningSystem, service: str) -> list[dict]:
    return requests.get(f"{system.standins_url()}received.json", params={"service": service}, timeout=10).json()


@pytest.mark.browser
def test_the_readme_tour_works_against_make_runs_own_processes(running_system, chromium):
    """Form → diagnostic lead → the prototype's preview; chat → a streamed answer and a linked lead; the
    confirmation email; the dashboard's figures; an email dropped in the demo mailbox → a contact and a task."""
    from playwright.sync_api import expect

    SHOTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(base_url=running_system.base)
    context.set_default_timeout(20_000)
    page = context.new_page()
    stamp = int(time.time())
    email = f"tour-{stamp}@example.com"

    # 1. The lead form: a diagnostic request, then its progress page reaches the preview.
    page.goto("/")
    expect(page.get_by_role("note")).to_contain_text("nothing leaves this machine")
    page.get_by_role("radio", name="Diagnostic").check()
    page.get_by_role("button", name="Next").click()
    page.get_by_role("button", name="Next").click()
    page.get_by_label("First name").fill("Tour")
    page.get_by_label("Work email").fill(email)
    page.get_by_role("checkbox", name=re.compile("I agree")).check()
    page.screenshot(path=SHOTS / "1-form.png", full_page=True)
    page.get_by_role("button", name="Send request").click()
    watch = page.get_by_role("link", name="Watch your prototype being built")
    expect(watch).to_be_visible()
    watch.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Tour")
    expect(page.locator("[data-done]")).to_be_visible(timeout=90_000)
    expect(page.get_by_role("link", name="Open your prototype")).to_have_attribute("href", re.compile(r"/preview/"))
    page.screenshot(path=SHOTS / "2-prototype.png", full_page=True)

    # 2. The chat widget: a streamed answer, and the lead the agent creates is linked to the chat.
    page.goto("/chat/")
    page.get_by_label("Your message").fill(f"Could you build a booking app? I am Chat Tour, {stamp}-chat@example.com")
    page.keyboard.press("Enter")
    answer = page.locator(".chat__message--assistant").last
    expect(answer).not_to_be_empty(timeout=30_000)
    expect(page.locator("#chat-status")).to_be_hidden(timeout=60_000)
    page.screenshot(path=SHOTS / "3-chat.png", full_page=True)

    def chat_lead():
        with running_system.database() as db:
            return db.execute(
                "SELECT s.lead_id FROM chat_chatsession s JOIN leadgen_lead l ON l.id = s.lead_id WHERE l.email = %s",
                [f"{stamp}-chat@example.com"],
            ).fetchone()

    wait_for(chat_lead, timeout=60, message="the agent's lead, linked to its chat")

    # 3. The confirmation email reaches the stand-in's inbox after its (demo) delay.
    wait_for(lambda: any(email in json.dumps(item["detail"]) for item in received(running_system, "mailgun")),
             timeout=150, message="the confirmation email")  # fmt: skip
    page.goto(running_system.standins_url())
    expect(page.locator("article").first).to_be_visible()
    page.screenshot(path=SHOTS / "4-standins-inbox.png", full_page=True)

    # 4. The back office: the dashboard has figures.
    page.goto("/admin/login/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo-password")
    page.get_by_role("button", name="Log in").click()
    page.goto("/admin/")
    expect(page.get_by_role("note")).to_contain_text("nothing leaves this machine")
    page.screenshot(path=SHOTS / "5-dashboard.png", full_page=True)
    with running_system.database() as db:
        assert db.execute("SELECT count(*) FROM crm_task").fetchone()[0] > 100, "a working office"

    # 5. An email dropped in the demo mailbox becomes a contact with an outreach task.
    mail = received(running_system, "mailbox")
    assert mail, "the notifier drops a lead email soon after the start"
    phone = mail[-1]["detail"]["lead"]["phone"]

    def outreach_task():
        with running_system.database() as db:
            return db.execute(
                "SELECT t.id FROM crm_task t JOIN crm_contact c ON c.id = t.contact_id"
                " JOIN leadgen_lead l ON l.id = t.source_lead_id WHERE l.phone = %s AND l.channel = 'email'",
                [phone],
            ).fetchone()

    wait_for(outreach_task, timeout=150, message="the mailbox's lead to become a contact with a task")
    context.close()


def test_the_office_is_kept_between_runs_and_ctrl_c_stops_everything(running_system, tmp_path):
    with running_system.database() as db:
        db.execute("CREATE TABLE kept_between_runs (id int)")
    stop(running_system)
    with pytest.raises(ProcessLookupError):
        os.killpg(running_system.process.pid, 0)
    assert not list((running_system.data / "services" / "pgdata").glob("postmaster.pid")), "PostgreSQL stopped"

    again = start(running_system.data.parent, free_port())
    try:
        with again.database() as db:
            assert db.execute("SELECT to_regclass('kept_between_runs')").fetchone()[0] == "kept_between_runs"
    finally:
        stop(again)

"""A host that dies: the product on a cluster of network namespaces (tests/cluster/cluster.py), hosts SIGKILLed
mid-run, a worker's cable pulled for a while, and afterwards nothing lost and nothing done twice.

Visitors submit web-form leads through nginx; some of them are prototype leads, whose visitors watch the
progress stream; along the way others ask the sales chat a question. Once a share of the leads is answered,
every process on the killed hosts is SIGKILLed at once and, in the full run, worker2's network is cut (its
bridge port down: its open connections hang, new ones find no route) for a while, then plugged back. The visitors carry
on as the product's clients do (tests/cluster/visitors.py). Then the jobs drain on what is left, and:

- every lead saved once, every submission answered, no Idempotency-Key left reserved by a dead request;
- every side effect delivered once, counted at the stand-ins (Pipedrive persons, organizations, leads and
  notes, ClickUp tasks, Mailgun emails, V0 chats), none twice; no job dead, pending or running;
- every prototype completed with one V0 chat, and every progress page got `complete`: a stream cut with web1
  came back through web2 with its Last-Event-ID, every event once, none missing;
- every chat question saved once; every answer the browser saw end is saved once as it saw it; an answer
  cut with web1 is as docs/chat.md says of a process killed outright (lost, or saved if it had ended).

Scale: CLUSTER_SCALE=full (`make cluster-test`) runs 2,000 leads, 200 prototype streams and 200 chats, kills
web1 and worker1 and cuts worker2 for 30 s; otherwise (`make test`) 120 leads, 6 streams and 6 chats, web1
killed. Figures are appended to var/cluster/results.jsonl; docs/reliability.md ("Cluster") has them.
"""

import asyncio
import json
import os
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psycopg
import pytest

from tests.cluster.cluster import Cluster, Timings, missing_requirements
from tests.cluster.visitors import Visitors

ROOT = Path(__file__).resolve().parents[2]
VAR = ROOT / "var" / "cluster"
FULL = os.environ.get("CLUSTER_SCALE") == "full"

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Scale:
    leads: int
    prototypes: int
    chats: int
    fault_at: float  # share of the leads answered when the hosts die
    killed: tuple  # the hosts whose every process is SIGKILLed then
    cut_seconds: float  # worker2's cable out for this long (0: not pulled)
    concurrency: int  # visitors submitting at once
    timings: Timings
    drain_seconds: float  # at most, after the last visitor is done


SCALES = {
    "short": Scale(
        leads=120, prototypes=6, chats=6, fault_at=0.3, killed=("web1",), cut_seconds=0,
        concurrency=16, drain_seconds=60,
        timings=Timings(lease_seconds=6, v0_parts=10, v0_interval=0.5, v0_finish_after=6.0),
    ),
    "full": Scale(
        leads=2000, prototypes=200, chats=200, fault_at=0.4, killed=("web1", "worker1"), cut_seconds=30,
        concurrency=32, drain_seconds=900,
        timings=Timings(lease_seconds=10, v0_parts=15, v0_interval=1.0, v0_finish_after=16.0),
    ),
}


@dataclass
class Figures:
    scale: str
    leads_in: int = 0
    leads_saved: int = 0
    leads_lost: int = 0
    leads_twice: int = 0
    submissions_unanswered: int = 0
    keys_left_in_progress: int = 0  # Idempotency-Keys reserved by a request that never finished
    answers: dict = field(default_factory=dict)  # every attempt's status, counted
    side_effects_expected: int = 0
    side_effects_delivered: int = 0
    duplicates: int = 0
    lost: int = 0
    jobs: dict = field(default_factory=dict)  # by status at the end
    attempts: dict = field(default_factory=dict)  # job attempts by outcome
    jobs_reclaimed: int = 0  # attempts lost with their worker, run again after the sweep reclaimed them
    reclaimed_by_kind: dict = field(default_factory=dict)
    processes_killed: dict = field(default_factory=dict)
    prototypes: int = 0
    prototypes_completed: int = 0
    streams_complete: int = 0
    streams_cut: int = 0
    reconnects: int = 0
    reconnects_with_last_event_id: int = 0
    reconnects_through_web2: int = 0
    stream_events_missing: int = 0
    stream_events_twice: int = 0
    chats: int = 0
    chats_as_documented: int = 0
    chat_outcomes: dict = field(default_factory=dict)
    seconds_to_start: float = 0.0
    seconds_of_intake: float = 0.0
    seconds_visitors_done_after_fault: float = 0.0  # every submission, stream and chat ended
    seconds_to_drain_after_fault: float = 0.0  # the last job finished
    last_jobs: list = field(default_factory=list)  # kind, attempts, created and finished (s after the fault)
    seconds_total: float = 0.0


def pending_work(database_url: str) -> tuple[int, int]:
    """Jobs pending or running, prototypes not finished."""
    with psycopg.connect(database_url.replace("postgres://", "postgresql://"), connect_timeout=5) as connection:
        jobs = connection.execute("SELECT count(*) FROM jobs_job WHERE status IN ('pending', 'running')").fetchone()
        prototypes = connection.execute(
            "SELECT count(*) FROM prototypes_prototype WHERE state NOT IN ('completed', 'failed')"
        ).fetchone()
    return jobs[0], prototypes[0]


async def drive(cluster: Cluster, scale: Scale, figures: Figures, tag: str):
    """The visitors, the fault at `fault_at`, then the drain; what each visitor saw."""
    net, visitors_at = cluster.net, cluster.net.visitors
    every_prototype = scale.leads // scale.prototypes
    every_chat = scale.leads // scale.chats
    submissions, watches, conversations = [], [], []
    fault: dict = {}
    gate = asyncio.Semaphore(scale.concurrency)
    answered = 0
    stream_seconds = scale.drain_seconds + 120

    async def pull_the_plug():
        fault["at"] = time.time()
        figures.processes_killed = {host: await asyncio.to_thread(net.kill_host, host) for host in scale.killed}
        if scale.cut_seconds:
            await asyncio.to_thread(net.cable, "worker2", connected=False)
            await asyncio.sleep(scale.cut_seconds)
            await asyncio.to_thread(net.cable, "worker2", connected=True)

    async def watch(lead_id, visitor):
        watches.append(await visitors.watch(lead_id, visitor=visitor, seconds=stream_seconds))

    async def converse(n):
        conversations.append(await visitors.converse(n, visitor=n))

    tasks = []

    async def one(n: int):
        nonlocal answered
        prototype = n % every_prototype == 0 and n // every_prototype < scale.prototypes
        # A prototype lead's visitor has an address of its own: one prototype in progress per address.
        visitor = n // every_prototype if prototype else n
        async with gate:
            submission = await visitors.submit(n, visitor=visitor, prototype=prototype)
        submissions.append(submission)
        if prototype and submission.lead_id:
            tasks.append(asyncio.create_task(watch(submission.lead_id, visitor)))
        answered += 1
        if answered % every_chat == 0 and answered // every_chat <= scale.chats:
            tasks.append(asyncio.create_task(converse(answered // every_chat)))
        if answered == int(scale.leads * scale.fault_at):
            tasks.append(asyncio.create_task(pull_the_plug()))

    chat_key = cluster.env["CHAT_API_KEY"]
    async with Visitors(cluster.url, visitors_at, tag, chat_key=chat_key) as visitors:
        started = time.monotonic()
        await asyncio.gather(*(one(n) for n in range(scale.leads)))
        figures.seconds_of_intake = round(time.monotonic() - started, 1)
        for task in tasks:  # the streams, the chats and the fault, each bounded in time
            await task
    figures.seconds_visitors_done_after_fault = round(time.time() - fault["at"], 1)
    ends = time.monotonic() + scale.drain_seconds
    while time.monotonic() < ends and any(await asyncio.to_thread(pending_work, cluster.database_url)):
        await asyncio.sleep(1)
    return submissions, watches, conversations, fault["at"]


def count_leads(figures: Figures, submissions, state) -> None:
    saved = Counter(email for _, _, email, _, _ in state["leads"])
    figures.leads_in = len(submissions)
    figures.leads_saved = len(saved)
    figures.leads_lost = sum(1 for s in submissions if not saved[s.email])
    figures.leads_twice = sum(count - 1 for count in saved.values())
    figures.submissions_unanswered = sum(1 for s in submissions if s.lead_id is None)
    figures.answers = dict(Counter(str(answer) for s in submissions for answer in s.answers))


def count_side_effects(figures: Figures, state, records) -> list[str]:
    """Six per lead (person, organization, Pipedrive lead, note, ClickUp task, confirmation email), and per
    completed prototype its V0 chat, "Prototype ready" task, Pipedrive note and email. Returns what is amiss
    by identity."""
    leads = [row for row in state["leads"] if row[3] == "lead"]
    completed = [lead_id for lead_id, prototype_state in state["prototypes"] if prototype_state == "completed"]
    chats = records["v0_chats"]
    figures.side_effects_expected = 6 * len(leads) + 4 * len(completed)
    delivered = sum(len(records[kind]) for kind in ("persons", "organizations", "leads", "notes", "tasks", "emails"))
    delivered += sum(chats.values())
    figures.duplicates = sum(records["duplicates"].values()) + sum(count - 1 for count in chats.values())
    figures.side_effects_delivered = delivered - figures.duplicates
    figures.lost = figures.side_effects_expected - figures.side_effects_delivered
    amiss = []
    for name, expected, found in (
        ("person", {email for _, _, email, _, _ in leads}, set(records["persons"])),
        ("organization", {company for *_, company in leads}, set(records["organizations"])),
        ("Pipedrive lead", {f"leadgen-lead-{pk}" for pk, *_ in leads}, set(records["leads"])),
        ("V0 chat", set(completed), set(chats)),
    ):
        amiss += [f"{name} missing: {identity}" for identity in sorted(expected - found)[:10]]
    return amiss


def count_streams(figures: Figures, watches, web2: str) -> list[str]:
    amiss = []
    figures.streams_complete = sum(w.outcome == "complete" for w in watches)
    for watch in watches:
        ids = [i for connection in watch.connections for i in connection.ids]
        figures.stream_events_twice += len(ids) - len(set(ids))
        figures.stream_events_missing += (max(ids) - len(set(ids))) if ids else 0
        if watch.cut:
            figures.streams_cut += 1
        reconnects = watch.connections[1:]  # with Last-Event-ID, unless the cut came before the first event
        figures.reconnects += len(reconnects)
        figures.reconnects_with_last_event_id += sum(bool(c.last_event_id) for c in reconnects)
        # X-Upstream lists every web host nginx tried, the one that answered last.
        through_web2 = [c for c in reconnects if c.status == 200 and c.upstream.split(", ")[-1] == web2]
        figures.reconnects_through_web2 += len(through_web2)
        ended_through_web2 = bool(through_web2) and through_web2[-1] is watch.connections[-1]
        if watch.cut and not (watch.outcome == "complete" and ended_through_web2):
            amiss.append(f"stream of {watch.lead_id} cut, did not end through web2: {watch.connections}")
        if watch.outcome != "complete":
            amiss.append(f"stream of {watch.lead_id} ended {watch.outcome!r}: {watch.connections}")
    return amiss


def count_chats(figures: Figures, conversations, state, answer: str) -> list[str]:
    """As docs/chat.md says: the question saved once; an answer the browser saw end (`done`) saved once,
    complete, as sent; one cut with its web process lost, or saved once if the relay had finished it."""
    amiss = []
    outcomes = Counter()
    for conversation in conversations:
        saved = state["chat"].get(conversation.session_id, [])
        questions = [m for m in saved if m[0] == "user"]
        answers = [m for m in saved if m[0] == "assistant"]
        said = "".join(conversation.tokens)
        if conversation.final and conversation.final[0] == "done":
            outcome = "done"
            ok = len(questions) == 1 and [a[1:] for a in answers] == [["complete", answer]] and said == answer
        elif conversation.final:
            outcome = "error"
            expected = "partial" if said else "failed"
            ok = len(questions) == 1 and [a[1:] for a in answers] == [[expected, said]]
        else:
            outcome = "cut"
            # Killed outright: the question may not have been saved yet; an answer is lost or saved once.
            ok = len(questions) <= 1 and len(answers) <= int(bool(questions)) and all(
                a[1] == "complete" and a[2] == answer for a in answers
            )
            outcome += f", question {'saved' if questions else 'not saved'}, answer {'saved' if answers else 'lost'}"
        outcomes[outcome] += 1
        figures.chats_as_documented += ok
        if not ok:
            amiss.append(f"chat {conversation.session_id} ({outcome}): {saved} vs {conversation}")
    figures.chats = len(conversations)
    figures.chat_outcomes = dict(outcomes)
    return amiss


@pytest.fixture
def cluster():
    scale = SCALES["full" if FULL else "short"]
    if reason := missing_requirements():
        pytest.skip(reason)
    started = time.monotonic()
    running = Cluster(scale.timings, VAR / "logs")
    try:
        yield running.start(), scale, time.monotonic() - started
    finally:
        running.stop()


@pytest.mark.timeout(3600 if FULL else 300)
def test_a_host_that_dies_loses_nothing_and_does_nothing_twice(cluster):
    cluster, scale, seconds_to_start = cluster
    began = time.monotonic()
    figures = Figures("full" if FULL else "short", seconds_to_start=round(seconds_to_start, 1))
    tag = uuid.uuid4().hex[:6]
    submissions, watches, conversations, fault_at = asyncio.run(drive(cluster, scale, figures, tag))
    state, records = cluster.state(), cluster.records()
    # The visitors' work drained when the last job made before they were all done finished (beat's
    # periodic jobs go on after).
    figures.last_jobs = [
        [kind, attempts, round(created - fault_at, 1), round(finished - fault_at, 1)]
        for kind, attempts, created, finished in state["last_jobs"]
        if created - fault_at <= figures.seconds_visitors_done_after_fault
    ][:5]
    figures.seconds_to_drain_after_fault = figures.last_jobs[0][3] if figures.last_jobs else 0.0
    count_leads(figures, submissions, state)
    amiss = count_side_effects(figures, state, records)
    figures.jobs = state["jobs"]
    figures.keys_left_in_progress = state["keys_in_progress"]
    figures.attempts = state["attempts"]
    figures.jobs_reclaimed = state["attempts"].get("lost", 0)
    figures.reclaimed_by_kind = state["lost_by_kind"]
    figures.prototypes = len(state["prototypes"])
    figures.prototypes_completed = sum(s == "completed" for _, s in state["prototypes"])
    amiss += count_streams(figures, watches, cluster.web_upstream("web2"))
    amiss += count_chats(figures, conversations, state, records["agent_answer"])
    figures.seconds_total = round(time.monotonic() - began + seconds_to_start, 1)
    VAR.mkdir(parents=True, exist_ok=True)
    with (VAR / "results.jsonl").open("a") as out:
        out.write(json.dumps({**asdict(figures), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    print(json.dumps(asdict(figures), indent=1))
    unanswered = [(s.n, s.answers) for s in submissions if s.lead_id is None]

    # Every check, then one failure listing whatever did not hold.
    problems = amiss[:20]
    for holds, what in (
        ((figures.leads_lost, figures.leads_twice) == (0, 0), "every lead saved once"),
        (not unanswered, f"every submission answered: {unanswered[:5]}"),
        (figures.keys_left_in_progress == 0, "no Idempotency-Key left reserved by a request that died"),
        ((figures.lost, figures.duplicates) == (0, 0), "every side effect delivered once"),
        (state["dead"] == [], f"no dead job: {state['dead'][:5]}"),
        (set(figures.jobs) <= {"succeeded", "skipped"}, "nothing pending or running after the drain"),
        (figures.prototypes_completed == figures.prototypes == scale.prototypes, "every prototype completed"),
        (figures.streams_complete == len(watches) == scale.prototypes, "every progress stream got `complete`"),
        ((figures.stream_events_missing, figures.stream_events_twice) == (0, 0), "every stream event once"),
        (figures.chats_as_documented == figures.chats == scale.chats, "every chat as docs/chat.md says"),
        (all(figures.processes_killed.values()), "every host killed had processes to kill"),
    ):
        if not holds:
            problems.append(what)
    assert not problems, problems

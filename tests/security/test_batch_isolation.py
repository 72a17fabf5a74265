"""One bad item in a batched write fails alone: every other caller's item of the same batch is written.

The MCP server records every user's tool calls in shared batches (docs_mcp.wrapper's usage writer), and the
progress stream logs every relay's V0 steps in shared batches (prototypes.relay): one value the database
refuses must not lose the others, and what the server keeps of a caller's own text never holds one."""

import asyncio

import pytest
from django.db import DataError, ProgrammingError, connection
from django.utils import timezone
from structlog.testing import capture_logs

from docs_mcp import wrapper
from docs_users.activity import McpToolCall
from docs_users.models import TrackedUser
from foundation.batching import Batches
from prototypes import relay
from prototypes.models import Prototype, PrototypeEvent
from tests.docs_mcp import conftest as docs_mcp_fixtures
from tests.docs_mcp.conftest import mcp_session, serve_mcp
from tests.prototypes.conftest import make_lead

pytestmark = pytest.mark.django_db(transaction=True)


# The MCP tests' stand-ins of Auth0 and Kapa, where this module's MCP process reaches them.
upstream_ports, auth0, kapa = docs_mcp_fixtures.upstream_ports, docs_mcp_fixtures.auth0, docs_mcp_fixtures.kapa


@pytest.fixture(scope="module")
def mcp_server(django_db_setup, upstream_ports, make_httpserver, tmp_path_factory):
    yield from serve_mcp(upstream_ports, make_httpserver, tmp_path_factory, MCP_TOOL_CALLS_RATE="1000/min")


def tool_call(sub: str, n: int = 0, **fields) -> McpToolCall:
    return McpToolCall(**{"sub": sub, "tool": "search_docs", "context": f"reason {n}", "at": timezone.now(), **fields})


def record_together(calls: list[McpToolCall]) -> list:
    """The calls handed to the MCP server's usage writer at one moment (so in one batch), each awaited as the
    server awaits it; each one's failure, or None."""

    async def scenario():
        recordings = [wrapper._usage.add(call) for call in calls]
        await asyncio.gather(
            *(wrapper._settled(recording, call.tool) for recording, call in zip(recordings, calls, strict=True))
        )
        return [recording.exception() for recording in recordings]

    return asyncio.run(scenario())


def test_a_call_the_database_refuses_fails_alone_and_every_other_users_call_is_recorded():
    # A subject no row can hold: the identity provider's id, never rewritten, so the database refuses it.
    calls = [tool_call("auth0|alan", n) for n in range(12)]
    calls[6:6] = [tool_call("auth0|bad\x00subject", context="the refused caller's reason")]
    calls += [tool_call("auth0|ada", n) for n in range(3)]

    with capture_logs() as logs:
        failures = record_together(calls)

    assert isinstance(failures[6], DataError)
    assert failures[:6] + failures[7:] == [None] * 15
    alan, ada = TrackedUser.objects.get(sub="auth0|alan"), TrackedUser.objects.get(sub="auth0|ada")
    assert alan.mcp_tool_counts == {"search_docs": 12}
    assert sorted(intent["context"] for intent in alan.mcp_agent_intents) == sorted(f"reason {n}" for n in range(12))
    assert ada.mcp_tool_counts == {"search_docs": 3}
    assert TrackedUser.objects.count() == 2
    # The refused call is logged by what failed, never by the values it held.
    assert logs == [
        {"event": "mcp_tool_call_not_recorded", "tool": "search_docs", "error": "DataError", "log_level": "error"}
    ]


@pytest.mark.parametrize("character", ["\x00", "\ud800"])
def test_a_callers_text_the_database_cannot_store_is_kept_without_it_and_loses_nobodys_call(character):
    calls = [tool_call("auth0|alan", n) for n in range(12)]
    calls[3:3] = [tool_call("auth0|ada", context=f"why{character} TLS", client_name=f"cursor{character}-vscode")]

    assert record_together(calls) == [None] * 13
    ada = TrackedUser.objects.get(sub="auth0|ada")
    assert [intent["context"] for intent in ada.mcp_agent_intents] == ["why TLS"]
    assert ada.mcp_client == "Cursor"
    assert TrackedUser.objects.get(sub="auth0|alan").mcp_tool_counts == {"search_docs": 12}


def test_through_the_mcp_server_a_context_and_client_name_with_nul_are_recorded_without_it(mcp_server, auth0, kapa):
    async def scenario():
        async with (
            mcp_session(mcp_server, auth0.mint("auth0|ada"), client_name="cursor\x00-vscode") as ada,
            mcp_session(mcp_server, auth0.mint("auth0|alan")) as alan,
        ):
            await asyncio.gather(
                ada.call_tool("search_docs", {"query": "tls", "context": "the user\x00 asks about TLS"}),
                *(alan.call_tool("search_docs", {"query": "tls", "context": f"reason {n}"}) for n in range(12)),
            )

    asyncio.run(scenario())
    ada = TrackedUser.objects.get(sub="auth0|ada")
    assert ada.mcp_tool_counts == {"search_docs": 1}
    assert [intent["context"] for intent in ada.mcp_agent_intents] == ["the user asks about TLS"]
    assert ada.mcp_client == "Cursor"
    assert TrackedUser.objects.get(sub="auth0|alan").mcp_tool_counts == {"search_docs": 12}


def test_a_relay_step_the_database_refuses_loses_no_other_relays_step():
    prototypes = [
        Prototype.objects.get(lead=make_lead(email=f"lead{n}@analytical.example", client_ip=f"192.0.2.{n + 1}"))
        for n in range(4)
    ]
    steps = [(prototype.pk, "Writing the page", 1, f"Prototype {n}") for n, prototype in enumerate(prototypes)]
    steps[2] = (prototypes[2].pk, "Writing the page", 1, "A title V0 sent with \x00 in it")

    async def scenario():
        logged = [relay.step_log.add(step) for step in steps]
        await asyncio.gather(*logged, return_exceptions=True)
        return [recording.exception() for recording in logged]

    failures = asyncio.run(scenario())

    assert isinstance(failures[2], DataError) and failures[:2] + failures[3:] == [None] * 3
    titled = {event.prototype_id: event.data["title"] for event in PrototypeEvent.objects.filter(data__step=1)}
    assert titled == {prototypes[n].pk: f"Prototype {n}" for n in (0, 1, 3)}


def test_a_batch_that_fails_for_another_reason_fails_at_once_without_writing_again():
    # Not an item's values but the database's state (here a statement it cannot run, as when it is down):
    # running halves again would only wait longer for the same answer.
    attempts = []

    def write(calls):
        attempts.append(len(calls))
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM tracking_trackeduser")

    writes = Batches("test-writes", write)

    async def scenario():
        return await asyncio.gather(*[writes.add(tool_call(f"auth0|{n}")) for n in range(8)], return_exceptions=True)

    failures = asyncio.run(scenario())
    assert attempts == [8] and all(isinstance(failure, ProgrammingError) for failure in failures)

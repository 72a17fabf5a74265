"""A signed-in user past MCP_TOOL_CALLS_RATE gets a tool error instead of the tool; others are not affected."""

import asyncio

import pytest

from docs_users.models import TrackedUser
from tests.conftest import minute_with_time_left
from tests.docs_mcp.conftest import mcp_session, serve_mcp

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def strict_mcp_server(django_db_setup, upstream_ports, make_httpserver, tmp_path_factory):
    yield from serve_mcp(upstream_ports, make_httpserver, tmp_path_factory, MCP_TOOL_CALLS_RATE="3/min")


def test_calls_past_the_rate_are_refused_per_user(strict_mcp_server, auth0, kapa):
    async def scenario():
        async with (
            mcp_session(strict_mcp_server, auth0.mint("auth0|busy")) as busy,
            mcp_session(strict_mcp_server, auth0.mint("auth0|calm")) as calm,
        ):
            results = []
            for n in range(5):
                results.append(await busy.call_tool("search_docs", {"query": f"q{n}"}))
                await asyncio.sleep(0.2)  # the count of a call lands beside it, before the next
            return results, await calm.call_tool("search_docs", {"query": "calm"})

    minute_with_time_left()
    busy, calm = asyncio.run(scenario())
    assert [result.is_error for result in busy] == [False, False, False, True, True]
    assert "Too many tool calls" in busy[3].content[0].text
    assert not calm.is_error
    assert TrackedUser.objects.get(sub="auth0|busy").mcp_tool_counts == {"search_docs": 3}
    assert len(kapa.requests) == 4

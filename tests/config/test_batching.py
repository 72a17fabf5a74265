"""Batched calls from the event loop: what arrives while a batch runs goes in the next one, together."""

import asyncio
import threading

import pytest
from django.db import connection

from docs_users import activity
from docs_users.models import TrackedUser
from foundation.batching import Batches


@pytest.mark.django_db(transaction=True)
def test_items_added_while_a_batch_is_written_are_written_together_and_each_waits_for_its_own():
    batches, first_batch_running, release = [], threading.Event(), threading.Event()

    def write(calls):
        batches.append([call.sub for call in calls])
        if len(batches) == 1:
            first_batch_running.set()
            release.wait(5)
        activity.mcp_tool_calls_record(calls)
        return [None] * len(calls)

    writes = Batches("test-writes", write)

    async def scenario():
        first = writes.add(activity.McpToolCall(sub="auth0|a", tool="search_docs"))
        await asyncio.to_thread(first_batch_running.wait, 5)
        rest = [writes.add(activity.McpToolCall(sub=f"auth0|{n}", tool="search_docs")) for n in range(20)]
        assert not first.done()
        release.set()
        await first
        await asyncio.gather(*rest)

    asyncio.run(scenario())
    assert batches == [["auth0|a"], [f"auth0|{n}" for n in range(20)]]
    assert TrackedUser.objects.count() == 21


@pytest.mark.django_db(transaction=True)
def test_a_failed_batch_fails_its_items_and_the_next_batch_is_written_on_a_fresh_connection():
    attempts = []

    def write(calls):
        attempts.append(len(calls))
        if len(attempts) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT no_such_column FROM tracking_trackeduser")
        activity.mcp_tool_calls_record(calls)
        return [None] * len(calls)

    writes = Batches("test-writes", write)

    async def scenario():
        with pytest.raises(Exception, match="no_such_column"):
            await writes.add(activity.McpToolCall(sub="auth0|a", tool="search_docs"))
        await writes.add(activity.McpToolCall(sub="auth0|b", tool="search_docs"))

    asyncio.run(scenario())
    assert list(TrackedUser.objects.values_list("sub", flat=True)) == ["auth0|b"]


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_waiter_does_not_take_its_item_out_of_the_batch():
    release = threading.Event()

    def write(calls):
        release.wait(5)
        activity.mcp_tool_calls_record(calls)
        return [None] * len(calls)

    writes = Batches("test-writes", write)

    async def scenario():
        waiting = asyncio.ensure_future(writes.add(activity.McpToolCall(sub="auth0|gone", tool="search_docs")))
        await asyncio.sleep(0.05)
        waiting.cancel()
        after = writes.add(activity.McpToolCall(sub="auth0|next", tool="search_docs"))
        release.set()
        await after

    asyncio.run(scenario())
    assert set(TrackedUser.objects.values_list("sub", flat=True)) == {"auth0|gone", "auth0|next"}

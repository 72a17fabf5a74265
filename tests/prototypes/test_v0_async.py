"""The V0 client's calls on the event loop (aiohttp) against the local v2 server: the same requests,
answers and error mapping as its HttpClient calls."""

import asyncio
import socket

import aiohttp
import pytest

from integrations.http import HttpTimeoutError
from integrations.v0 import client as v0
from jobs import PermanentError, TransientError


def call(method: str, **kwargs):
    async def scenario():
        async with aiohttp.ClientSession() as session:
            return await getattr(v0.client_from_settings(), method)(session=session, **kwargs)

    return asyncio.run(scenario())


def test_acreate_chat_sends_what_create_chat_sends_and_reads_the_same_answer(fake_v0):
    metadata = {"leadKey": "lead-1"}
    chat_id, message_id = call("acreate_chat", message="Build it", system_prompt="Be brief", metadata=metadata)
    assert chat_id in fake_v0.chats and fake_v0.chats[chat_id].messages[-1]["id"] == message_id
    v0.client_from_settings().create_chat(message="Build it", system_prompt="Be brief", metadata=metadata)
    awaited, synchronous = fake_v0.requests_to("/chats/async")
    assert awaited == synchronous


def test_afind_chat_finds_the_chat_by_our_metadata(fake_v0):
    chat_id, _ = call("acreate_chat", message="Build it", metadata={"leadKey": "lead-1"})
    assert call("afind_chat", metadata_key="leadKey", value="lead-1") == chat_id
    assert call("afind_chat", metadata_key="leadKey", value="lead-2") is None


@pytest.mark.parametrize(("status", "error"), [(503, TransientError), (429, TransientError), (422, PermanentError)])
def test_acreate_chat_maps_errors_as_the_sync_calls_do(fake_v0, status, error):
    fake_v0.behaviour.create_status = status
    with pytest.raises(error, match=f"HTTP {status}"):
        call("acreate_chat", message="Build it")


def test_the_generation_and_preview_read_as_the_sync_calls_read_them(fake_v0):
    fake_v0.behaviour.auto_finish = True
    chat_id, message_id = call("acreate_chat", message="Build it")
    generation = call("alatest_generation", chat_id=chat_id)
    assert generation == v0.client_from_settings().latest_generation(chat_id)
    assert generation.finished and generation.message_id == message_id and generation.finish_reason == "stop"
    assert call("apreview", chat_id=chat_id) == v0.client_from_settings().preview(chat_id)
    assert call("apreview", chat_id=chat_id).url == f"https://preview.example.com/{chat_id}"


def test_a_wrong_key_is_permanent(fake_v0, settings):
    settings.V0_API_KEY = "wrong"
    with pytest.raises(PermanentError, match="HTTP 401"):
        call("afind_chat", metadata_key="leadKey", value="lead-1")


def test_a_silent_or_absent_server_is_transient(settings):
    settings.V0_API_KEY, settings.HTTP_READ_TIMEOUT = "key", 0.3
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings.V0_API_URL = f"http://127.0.0.1:{silent.getsockname()[1]}/v2"
        with pytest.raises(HttpTimeoutError):
            call("acreate_chat", message="Build it")
    # closed now: refused
    with pytest.raises(TransientError, match="connection failed"):
        call("acreate_chat", message="Build it")

"""The chat widget at /chat/ in headless Chromium, served by a real daphne process (config.asgi:application)
in front of the fake agent: tokens appear as they stream, a reload mid-answer shows the whole answer, errors
are said plainly."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from chat.models import ChatMessage
from standins.agent import Agent
from tests.conftest import subprocess_env, web_process

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
TOKENS = [f"word{index} " for index in range(20)]


@pytest.fixture
def agent():
    fake = Agent().start()
    fake.tokens = list(TOKENS)
    fake.delay = 0.15
    yield fake
    fake.stop()


@pytest.fixture
def daphne(agent):
    env = subprocess_env(
        CHAT_AGENT_URL=agent.url,
        CHAT_API_KEY="browser-chat-key",
        DEBUG="true",  # WhiteNoise serves the static files from the source folders
        LOG_LEVEL="WARNING",
    )
    root = Path(__file__).resolve().parents[2]
    with web_process(env, server="daphne", stdout=None, stderr=None, cwd=root) as (_, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def page(chromium, daphne):
    context = chromium.new_context(base_url=daphne, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


def assistant(page):
    return page.locator(".chat__message--assistant").last


def test_tokens_stream_in_and_a_reload_mid_answer_shows_the_whole_answer(page, agent):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.goto("/chat/")
    page.get_by_label("Your message").fill("Could you build a prototype of our booking flow?")
    page.keyboard.press("Enter")

    expect(assistant(page)).to_contain_text("word2", timeout=10_000)
    partial = assistant(page).inner_text()
    assert "word19" not in partial, "tokens are shown as they arrive"
    page.screenshot(path=SHOTS / "chat-streaming.png")

    page.reload()
    expect(page.locator(".chat__message--user")).to_have_text(["Could you build a prototype of our booking flow?"])
    expect(assistant(page)).to_have_text("".join(TOKENS), timeout=15_000)
    expect(page.locator("#chat-status")).to_be_hidden()
    page.screenshot(path=SHOTS / "chat-after-reload.png")
    assert list(ChatMessage.objects.values_list("role", "state")) == [("user", "complete"), ("assistant", "complete")]

    agent.delay = 0.0
    page.get_by_label("Your message").fill("And how long does it take?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".chat__message--assistant")).to_have_count(2)
    expect(assistant(page)).to_have_text("".join(TOKENS))


def test_an_agent_that_drops_mid_answer_is_said_plainly(page, agent):
    agent.mode, agent.cut_after, agent.delay = "drop", 3, 0.05
    page.goto("/chat/")
    page.get_by_label("Your message").fill("What does a dedicated team cost?")
    page.keyboard.press("Enter")

    expect(page.locator("#chat-status")).to_contain_text("could not answer", timeout=10_000)
    expect(assistant(page)).to_have_text("".join(TOKENS[:3]))
    expect(assistant(page)).to_have_class("chat__message chat__message--assistant chat__message--partial")
    page.screenshot(path=SHOTS / "chat-agent-dropped.png")
    page.reload()
    expect(assistant(page)).to_have_text("".join(TOKENS[:3]))
    expect(assistant(page)).to_have_class("chat__message chat__message--assistant chat__message--partial")

"""The tools: search the docs, ask the docs assistant, read a docs page.

The upstream clients are synchronous (integrations.http.HttpClient), so each
call runs in a worker thread (docs_mcp/threads.py); one client per process
keeps its connections, one per worker thread.
An upstream failure is a tool error the agent can read, never a protocol error.
"""

from functools import lru_cache
from typing import Annotated

import structlog
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from docs_mcp.threads import WORKER_THREADS, in_worker
from docs_mcp.wrapper import Caller, caller_question_record
from integrations.docs_site.client import DocsSiteClient, PageRefused
from integrations.kapa.client import KapaClient
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

SNIPPET_CHARS = 500


class SearchHit(BaseModel):
    title: str
    url: str
    snippet: str


class Source(BaseModel):
    title: str
    url: str


class Answer(BaseModel):
    answer: str
    uncertain: bool = Field(description="True when the documentation did not settle the question.")
    sources: list[Source]


class Page(BaseModel):
    url: str
    title: str
    text: str
    truncated: bool = Field(description="True when the page was longer than the text returned.")


async def search_docs(
    query: Annotated[str, Field(min_length=1, max_length=500, description="What to look for in the documentation.")],
) -> list[SearchHit]:
    """Search the documentation: the most relevant passages, best first, with their page titles and URLs."""
    chunks = await _upstream("search", lambda kapa: kapa.search(query, limit=settings.MCP_SEARCH_RESULTS))
    return [SearchHit(title=chunk.title, url=chunk.url, snippet=chunk.content[:SNIPPET_CHARS]) for chunk in chunks]


async def ask_docs(
    question: Annotated[str, Field(min_length=1, max_length=2000, description="A question about the product.")],
    caller: Caller,
) -> Answer:
    """Ask the documentation assistant a question: an answer written from the docs, with its sources."""
    answer = await _upstream("ask", lambda kapa: kapa.ask(caller.sub, question))
    if answer.thread_id:  # without one there is no thread to count
        await caller_question_record(caller, thread_id=answer.thread_id, question=question)
    return Answer(
        answer=answer.answer,
        uncertain=answer.uncertain,
        sources=[Source(title=source.title, url=source.url) for source in answer.sources],
    )


async def get_page(
    url: Annotated[str, Field(min_length=1, max_length=2000, description="The URL of a documentation page.")],
) -> Page:
    """Read one page of the documentation site as plain text (only documentation URLs can be read)."""
    client = _docs_site_client(tuple(settings.MCP_DOCS_ORIGINS))
    if client is None:
        raise ToolError("Reading docs pages is not configured on this server.")
    try:
        page = await in_worker(client.page, url)
    except PageRefused as exc:
        raise ToolError(str(exc)) from exc
    except (TransientError, PermanentError) as exc:
        logger.warning("mcp_docs_page_failed", error=str(exc))
        raise ToolError("The page could not be read right now.") from exc
    return Page(url=page.url, title=page.title, text=page.text, truncated=page.truncated)


async def _upstream(what: str, call):
    kapa = _kapa_client(
        settings.KAPA_API_URL, settings.KAPA_API_KEY, settings.KAPA_PROJECT_ID, settings.KAPA_INTEGRATION_ID
    )
    if kapa is None:
        raise ToolError("The documentation assistant is not configured on this server.")
    try:
        return await in_worker(call, kapa)
    except ImproperlyConfigured as exc:  # KAPA_OWNER_SALT unset: no owner id to ask under
        logger.error("mcp_kapa_not_configured", call=what, error=str(exc))
        raise ToolError("The documentation assistant is not configured on this server.") from exc
    except (TransientError, PermanentError) as exc:
        logger.warning("mcp_kapa_failed", call=what, error=str(exc))
        raise ToolError("The documentation assistant is unavailable right now; try again shortly.") from exc


@lru_cache(maxsize=1)
def _kapa_client(url: str, api_key: str, project_id: str, integration_id: str) -> KapaClient | None:
    if not (api_key and project_id):
        return None
    return KapaClient(
        url, api_key=api_key, project_id=project_id, integration_id=integration_id, pool_size=WORKER_THREADS
    )


@lru_cache(maxsize=1)
def _docs_site_client(origins: tuple[str, ...]) -> DocsSiteClient | None:
    return DocsSiteClient(list(origins), pool_size=WORKER_THREADS) if origins else None


TOOLS = (search_docs, ask_docs, get_page)

"""The one wrapper every tool of the MCP server is registered through: the agent's `context`, per-user usage.

`tracked_tool(fn)` returns the function the SDK registers. Its signature is
the tool's own plus two keyword-only parameters:

- `context: str | None = None`, described to the agent. The SDK builds both
  the advertised input schema and the pydantic model that validates every
  call from this signature, so `context` is a real, validated argument
  (arguments a tool does not declare are dropped silently by that model:
  adding `context` to the advertised schema only would lose it).
- `ctx: Context`, which the SDK fills with the request context and leaves
  out of the schema.

A tool that declares a `caller: Caller` parameter gets the signed-in caller
there; it is not an argument the agent sees either.

A caller past MCP_TOOL_CALLS_RATE gets a tool error instead of the tool.

On each call the wrapper counts it in the caller's rate window and hands
the call's usage record (count per tool, last tool time, the capped context;
the user becomes pending) to the usage writer, which writes the calls of
every session of the moment in one transaction on a thread of its own. It
runs the tool with its own arguments only (`context` never reaches the tool
or anything it calls), then waits for the recording; a client that leaves
does not take its call out of the batch. The recording runs
beside the tool, so it adds no latency unless it is slower than the tool;
its failure is logged and never fails the call.
"""

import asyncio
import inspect
import threading
import time
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import structlog
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from docs_mcp.threads import in_worker
from docs_users import activity
from foundation.batching import Batches
from foundation.throttling import parse_rate

logger = structlog.get_logger(__name__)

CONTEXT_DESCRIPTION = (
    "Why you are calling this tool, in one sentence (for example: 'the user asks how to enable TLS'). "
    "Never include secrets, credentials or personal data."
)
ContextArgument = Annotated[str | None, Field(description=CONTEXT_DESCRIPTION)]
RESERVED = ("context", "ctx")


@dataclass(frozen=True)
class Caller:
    """The signed-in user behind a request, and the MCP client they use."""

    sub: str
    claims: dict
    user_agent: str
    client_name: str  # clientInfo.name of the session's initialize request; "" when the client sent none


def caller_of(request, client_name: str = "") -> Caller | None:
    """The caller of an HTTP request the SDK's bearer middleware authenticated; None without a verified token."""
    user = request.scope.get("user") if request is not None else None
    if not isinstance(user, AuthenticatedUser) or not user.access_token.subject:
        return None
    return Caller(
        sub=user.access_token.subject,
        claims=user.access_token.claims or {},
        user_agent=request.headers.get("user-agent", ""),
        client_name=client_name,
    )


def tracked_tool(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """The tool `fn` (async) with `context` added to its arguments and every call recorded for the caller."""
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    if clash := set(RESERVED) & set(signature.parameters):
        raise TypeError(f"{fn.__name__}: {sorted(clash)} are the wrapper's parameters")
    wants_caller = "caller" in signature.parameters
    tool_parameters = [p for name, p in signature.parameters.items() if name != "caller"]
    tool_name = fn.__name__

    async def call(*, ctx: Context, context: str | None = None, **arguments):
        client_params = ctx.session.client_params
        caller = caller_of(ctx.request_context.request, client_params.client_info.name if client_params else "")
        if wants_caller:
            if caller is None:
                raise RuntimeError("the tool needs a signed-in caller")
            arguments["caller"] = caller
        recording = None
        if caller is not None:
            if _rate.refuses(caller.sub):
                raise ToolError(
                    f"Too many tool calls: at most {settings.MCP_TOOL_CALLS_RATE} per user; try again shortly."
                )
            _rate.count(caller.sub)
            recording = _usage.add(
                activity.McpToolCall(
                    sub=caller.sub,
                    tool=tool_name,
                    user_agent=caller.user_agent,
                    client_name=caller.client_name,
                    context=context or "",
                    at=timezone.now(),
                )
            )
        try:
            return await fn(**arguments)
        finally:
            if recording is not None:  # a call cancelled meanwhile is recorded all the same (foundation.batching)
                await _settled(recording, tool_name)

    call.__name__ = fn.__name__
    call.__qualname__ = fn.__qualname__
    call.__doc__ = fn.__doc__
    call.__signature__ = signature.replace(
        parameters=[
            *tool_parameters,
            inspect.Parameter("context", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ContextArgument),
            inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context),
        ]
    )
    # The SDK finds the Context parameter through the type hints, the arguments through the signature.
    call.__annotations__ = {
        **{name: hint for name, hint in hints.items() if name != "caller"},
        "context": ContextArgument,
        "ctx": Context,
    }
    return call


async def caller_sign_in(caller: Caller) -> None:
    """Record the caller's sign-in through the MCP server (a session's initialize); failures are logged."""
    try:
        await _in_thread(
            activity.tracked_user_sign_in,
            sub=caller.sub,
            channel="mcp",
            # An address the provider has not verified may be anyone's: it must not name a lead.
            email=_text_claim(caller.claims, "email") if caller.claims.get("email_verified") is not False else "",
            given_name=_text_claim(caller.claims, "given_name"),
            family_name=_text_claim(caller.claims, "family_name"),
            org_name=_text_claim(caller.claims, "org_name"),
            user_agent=caller.user_agent,
            client_name=caller.client_name,
        )
    except Exception:
        logger.exception("mcp_sign_in_not_recorded")


async def caller_question_record(caller: Caller, *, thread_id: str, question: str) -> None:
    """Record a question the caller asked Kapa and the thread it started, for their Kapa engagement.

    Kapa keeps threads started through its Chat API apart from the ones the
    engagement fetch reads, so this record is how they reach the profile.
    Shielded, so a client that leaves does not lose it; a failure is logged
    by its kind only (never the question) and never fails the call.
    """
    try:
        with anyio.CancelScope(shield=True):
            await _in_thread(activity.kapa_question_record, sub=caller.sub, thread_id=thread_id, question=question)
    except Exception as exc:
        # The kind of failure only: a database error's message can quote the values it was given.
        logger.error("mcp_kapa_question_not_recorded", error=type(exc).__name__)


class _RateWindows:
    """Tool calls per caller in fixed windows of MCP_TOOL_CALLS_RATE, counted in this process.

    In memory, not in the cache the API throttles share: the MCP server's
    sessions live in its process (one process, or sticky routing by session),
    and a cache round trip per call cost a fifth of the server's CPU per call
    (bench/mcp). The count decides about the caller's next calls, so checking
    it adds nothing to a call: past the limit the caller is refused until the
    window ends. Only the current window's counts are kept.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._window = -1
        self._counts: dict[str, int] = {}

    def _limit(self) -> tuple[int, int, int]:
        limit, duration = parse_rate(settings.MCP_TOOL_CALLS_RATE)
        return limit, duration, int(time.time() // duration)

    def count(self, sub: str) -> None:
        _, _, window = self._limit()
        with self._lock:
            if window != self._window:
                self._window, self._counts = window, {}
            self._counts[sub] = self._counts.get(sub, 0) + 1

    def refuses(self, sub: str) -> bool:
        limit, _, window = self._limit()
        return window == self._window and self._counts.get(sub, 0) >= limit


_rate = _RateWindows()


# Every tool call's usage, all sessions' calls of the moment in one transaction (bench/mcp).
def _usage_record(calls: list[activity.McpToolCall]) -> list[None]:
    activity.mcp_tool_calls_record(calls)
    return [None] * len(calls)


_usage = Batches("mcp-usage", _usage_record)


async def _settled(recording: asyncio.Future, tool: str) -> None:
    try:
        await recording
    except Exception as exc:
        # The kind of failure only: a database error's message can quote the values it was given.
        logger.error("mcp_tool_call_not_recorded", tool=tool, error=type(exc).__name__)


def _with_fresh_connection(function, **kwargs):
    """Outside Django's request cycle nobody returns a worker thread's connection: done here, around the write."""
    close_old_connections()
    try:
        return function(**kwargs)
    finally:
        close_old_connections()


async def _in_thread(function, **kwargs):
    return await in_worker(_with_fresh_connection, function, **kwargs)


def _text_claim(claims: dict, name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""

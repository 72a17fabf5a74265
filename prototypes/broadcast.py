"""How logged prototype events reach the open progress streams.

The event log (PrototypeEvent) is the source of truth; this only wakes the
streams up with new events. Streams in this process hear them through an
in-process hub at once. Other processes hear them through the Channels layer
(channels-redis): announcements go out as `group_send`s of their events to
the group `prototypes` (one in flight per process, carrying what was
announced meanwhile), and each process has one listener on that group (one
channel, joined once, whatever the number of open streams), which hands what
other processes announced to its hub. While the layer cannot be reached a
stream reads the log after a second without news
instead (prototypes.stream). A stream that misses an announcement finds the
event in the log by its number.
"""

import asyncio
import os
import threading
import uuid
from collections import defaultdict

import structlog
from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers, get_channel_layer

logger = structlog.get_logger(__name__)

GROUP = "prototypes"
MESSAGE_TYPE = "prototype.events"
ORIGIN = f"{os.getpid()}.{uuid.uuid4().hex}"  # this process: its listener skips what the hub already delivered
GROUP_REFRESH_SECONDS = 3600  # channels_redis drops group members after a day (group_expiry)


def as_message(event) -> dict:
    return {"prototype": event.prototype_id, "number": event.number, "kind": event.kind, "data": event.data}


class Hub:
    """Queues of the streams open in this process, per prototype. Thread-safe: events are also logged in
    worker threads, while the queues belong to the event loop."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queues: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Queue]]] = defaultdict(set)

    def subscribe(self, prototype_id: int) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        with self._lock:
            self._queues[prototype_id].add((asyncio.get_running_loop(), queue))
        return queue

    def unsubscribe(self, prototype_id: int, queue: asyncio.Queue) -> None:
        with self._lock:
            subscribers = self._queues.get(prototype_id, set())
            subscribers.difference_update({entry for entry in subscribers if entry[1] is queue})
            if not subscribers:
                self._queues.pop(prototype_id, None)

    def publish(self, messages: list[dict]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        with self._lock:
            deliveries = [(entry, item) for item in messages for entry in self._queues.get(item["prototype"], ())]
        for (loop, queue), message in deliveries:
            if loop is running:
                queue.put_nowait(message)  # on the loop already (the relays' batches): no wake-up needed
                continue
            try:
                loop.call_soon_threadsafe(queue.put_nowait, message)
            except RuntimeError:  # that loop has closed: its stream is gone
                continue


hub = Hub()


class Listener:
    """This process's one subscription to the layer: a channel in GROUP, read by one task that hands other
    processes' announcements to the hub. Started by the first stream that needs it, on that stream's loop."""

    def __init__(self):
        self._task: asyncio.Task | None = None
        self._started: asyncio.Future | None = None

    async def ensure(self) -> None:
        """Listening once this returns; raises if the layer cannot be reached (the stream then reads the log)."""
        loop = asyncio.get_running_loop()
        if self._task is not None and self._task.get_loop() is loop and not self._task.done():
            return
        if self._started is not None and self._started.get_loop() is loop and not self._started.done():
            return await asyncio.shield(self._started)  # another stream is starting it
        self._started = started = loop.create_future()
        try:
            # A layer object of its own, made on this loop: channels_redis's receive state is bound to one loop.
            layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
            channel = await layer.new_channel()
            await layer.group_add(GROUP, channel)
        except BaseException as exc:
            started.set_exception(exc)
            started.exception()  # retrieved: only the waiters need it
            self._started = None
            raise
        self._task = loop.create_task(self._listen(layer, channel), name="prototype-events-listener")
        started.set_result(None)

    def serving_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop this process listens on (daphne's), while it runs; None in a worker process."""
        if self._task is None or self._task.done():
            return None
        loop = self._task.get_loop()
        return loop if loop.is_running() else None

    async def _listen(self, layer, channel) -> None:
        refresh = asyncio.get_running_loop().create_task(self._refresh(layer, channel))
        try:
            while not asyncio.current_task().cancelling():  # a receive that swallowed our cancellation
                try:
                    message = await layer.receive(channel)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the layer is down: the streams read the log meanwhile
                    if asyncio.current_task().cancelling():
                        raise  # channels_redis may turn our cancellation into another error: stop all the same
                    logger.warning("prototype_events_listener_failed", error=type(exc).__name__)
                    await asyncio.sleep(1)
                    await _quietly(layer.group_add(GROUP, channel))  # Redis may have restarted empty
                    continue
                if message.get("type") == MESSAGE_TYPE and message.get("origin") != ORIGIN:
                    hub.publish(message["events"])
        finally:
            refresh.cancel()

    async def _refresh(self, layer, channel) -> None:
        while True:
            await asyncio.sleep(GROUP_REFRESH_SECONDS)
            await _quietly(layer.group_add(GROUP, channel))


async def _quietly(awaitable) -> None:
    try:
        await awaitable
    except Exception as exc:
        logger.warning("prototype_events_group_add_failed", error=type(exc).__name__)


listener = Listener()


def announce(logged: list) -> None:
    """After commit: tell the open streams here and elsewhere. Never fails the caller: the log has the events.

    Under daphne the layer's send runs on the event loop without anyone waiting for it (a thread
    logging an event is not held up by Redis, nor the streams here); in a worker process, which has
    no loop, it is sent before this returns.
    """
    if not logged:
        return
    messages = [as_message(event) for event in logged]
    hub.publish(messages)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        outbox.add(messages)
    elif (serving := listener.serving_loop()) is not None:
        serving.call_soon_threadsafe(outbox.add, messages)
    else:
        try:
            async_to_sync(_send)(messages)
        except Exception as exc:  # as _send: never the caller's failure
            logger.warning("prototype_event_announce_failed", events=len(messages), error=type(exc).__name__)


class Outbox:
    """The announcements of this process's loop waiting for the layer: one send in flight at a time, which
    carries everything announced while the previous one was on its way. A group_send is four Redis round
    trips (and comes back to this process's own listener), so a thousand relays' batches cost a few of
    them a second, not one each."""

    def __init__(self):
        self._unsent: list[dict] = []
        self._sender: asyncio.Task | None = None

    def add(self, messages: list[dict]) -> None:
        self._unsent.extend(messages)
        loop = asyncio.get_running_loop()
        if self._sender is None or self._sender.done() or self._sender.get_loop() is not loop:
            self._sender = loop.create_task(self._send_all(), name="prototype-events-outbox")

    async def _send_all(self) -> None:
        while self._unsent:
            messages, self._unsent = self._unsent, []
            await _send(messages)


outbox = Outbox()


async def _send(messages: list[dict]) -> None:
    try:
        await get_channel_layer().group_send(GROUP, {"type": MESSAGE_TYPE, "origin": ORIGIN, "events": messages})
    except Exception as exc:
        logger.warning("prototype_event_announce_failed", events=len(messages), error=type(exc).__name__)

"""Polls that read the same message at once (a replay beside the scheduled poll) do not trip over each
other's bookkeeping: a poll that finishes a message clears its attempt count while another starts one."""

import threading

from tracking.services import MessageSource, message_attempt_start, message_attempts_clear


def test_an_attempt_starts_while_another_poll_clears_the_count():
    source = MessageSource("env", 1796146804, 11)
    stop, failures = threading.Event(), []

    def finishing_poll():  # what a poll does once the message's lead is saved
        while not stop.is_set():
            message_attempts_clear(source)

    clearer = threading.Thread(target=finishing_poll)
    clearer.start()
    try:
        for attempt in range(3000):
            try:
                assert message_attempt_start(source=source, poll=f"poll-{attempt}") >= 1
            except ValueError as exc:
                failures.append(exc)
    finally:
        stop.set()
        clearer.join()
    assert failures == [], f"{len(failures)} of 3000 attempts failed: {failures[0]}"

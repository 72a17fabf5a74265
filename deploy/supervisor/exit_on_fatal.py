"""supervisord event listener (deploy/supervisor/web.conf): when a process gives up starting (FATAL), stop
supervisord. Left alone, supervisord would run on serving nothing, and systemd or honcho would see a healthy
launcher; stopped, the unit restarts or honcho stops the whole system, with the process's error in the log."""

import os
import signal
import sys

from supervisor import childutils


def main() -> None:
    while True:
        headers, _payload = childutils.listener.wait(sys.stdin, sys.stdout)
        if headers["eventname"] == "PROCESS_STATE_FATAL":
            os.kill(os.getppid(), signal.SIGTERM)
        childutils.listener.ok(sys.stdout)


if __name__ == "__main__":
    main()

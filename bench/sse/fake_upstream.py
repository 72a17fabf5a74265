"""The fake V0 server of the SSE benchmark, in a process of its own: a part every --interval seconds.

    python bench/sse/fake_upstream.py --port P --parts 60 --interval 1.0 --emitted out/emitted.json

On SIGTERM it writes when each part frame of each chat was sent (time.time()) to --emitted.
"""

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from tests.prototypes.fake_v0 import Behaviour, FakeV0  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", type=int, default=60)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--emitted", required=True)
    parser.add_argument("--url-file", required=True)
    args = parser.parse_args()
    server = FakeV0(Behaviour(parts=args.parts, frame_interval=args.interval, api_key="bench-key")).start()
    Path(args.url_file).write_text(server.url)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    Path(args.emitted).write_text(json.dumps(server.emitted))


if __name__ == "__main__":
    main()

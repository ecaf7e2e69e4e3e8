"""moto in server mode, with each request applied atomically.

DynamoDB applies a conditional write atomically: the condition is checked and the write made as
one step, so of two racing claims exactly one wins. moto's threaded server checks and writes
without a lock, so under concurrency two conditional updates can both succeed, a race real
DynamoDB never has. This launcher keeps moto's server (threads per connection, keep-alive) but
runs one request at a time through the emulated services, which restores the atomicity the
product relies on. Long-polling calls (SQS WaitTimeSeconds) would hold the lock; the local stack
polls without waiting.

  python infra/moto_server.py -H 127.0.0.1 -p PORT
"""
import argparse
import os
import signal
import sys
import threading

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app


class OneRequestAtATime:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # Drain the response inside the lock: the work happens while it is produced.
            return list(self.app(environ, start_response))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, OneRequestAtATime(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()

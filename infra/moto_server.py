"""moto in server mode, with each request applied atomically.

DynamoDB applies a conditional write atomically: the condition is checked and the write made as
one step, so of two racing claims exactly one wins. moto's threaded server checks and writes
without a lock, so under concurrency two conditional updates can both succeed, a race real
DynamoDB never has. This launcher keeps moto's server (threads per connection, keep-alive) but
runs one request at a time through the emulated services, which restores the atomicity the
product relies on. Long-polling calls (SQS WaitTimeSeconds) would hold the lock; the local stack
polls without waiting.

It also makes a Query cost what it costs in DynamoDB, proportional to what it reads: moto 5.2.5
answers every Query by sorting the whole table (`Table.all_items`), so a Query of a module's 20
newest entries took 9.6 ms in a table of 1,000 items and 172 ms in one of 20,000, and a replayed
history ran slower per PR the longer it grew, which the product's own reads do not (patch_moto).

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


def patch_moto():
    """A Query reads its own partition (a base-table Query) or the table unsorted (an index
    Query, whose results moto sorts itself): the same items, in the same order, without sorting
    every item of the table first. Each Query runs under the one-request lock, so shadowing the
    table's `all_items` for its duration is seen by nothing else."""
    from moto.dynamodb.models.table import Table

    if getattr(Table.query, "_chronicle_patched", False):
        return
    original = Table.query

    def query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
              scan_index_forward, projection_expressions, index_name=None, *args, **kwargs):
        if index_name is None:
            held = self.items.get(hash_key) if hash_key is not None else None
            if held is None:
                part = []
            elif self.range_key_attr:
                part = list(held.values())
            else:
                part = [held]
            self.all_items = lambda: part
        else:
            self.all_items = lambda: [i for h in self.items.values()
                                      for i in (h.values() if self.range_key_attr else [h])]
        try:
            return original(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                            scan_index_forward, projection_expressions, index_name, *args, **kwargs)
        finally:
            del self.all_items

    query._chronicle_patched = True
    Table.query = query


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    patch_moto()
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, OneRequestAtATime(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()

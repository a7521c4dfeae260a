"""The soak test's webhook receiver (scripts/soak.sh): answers a third of
the requests 503 (so the server retries them) and the others 204, at
random. Listens on 127.0.0.1:PORT until killed; prints its counts every
minute."""

import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = {"ok": 0, "failed": 0}
lock = threading.Lock()


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        fail = random.randrange(3) == 0
        with lock:
            counts["failed" if fail else "ok"] += 1
        self.send_response(503 if fail else 204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def report():
    while True:
        time.sleep(60)
        with lock:
            print(f"receiver: {counts}", flush=True)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hook)
    threading.Thread(target=report, daemon=True).start()
    server.serve_forever()

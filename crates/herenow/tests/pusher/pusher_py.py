"""The Django side of an app on Pusher: PyPI's `pusher` library, called as
a Django view calls it, for python.test.js (run by pusher_clients.rs).

    python pusher_py.py trigger CHANNEL EVENT DATA_JSON [SOCKET_ID]
    python pusher_py.py authenticate CHANNEL SOCKET_ID [CUSTOM_DATA_JSON]

HERENOW_URL (http://HOST:PORT) and PUSHER_APP (ID:KEY:SECRET) say where
and as which app. Prints the library's answer as JSON; any error is a
non-zero exit with the library's message.
"""

import json
import os
import sys
from urllib.parse import urlsplit

import pusher


def client():
    url = urlsplit(os.environ["HERENOW_URL"])
    app_id, key, secret = os.environ["PUSHER_APP"].split(":")
    # As in docs/PUSHER.md: host, port and TLS off.
    return pusher.Pusher(app_id, key, secret, host=url.hostname, port=url.port, ssl=False)


def main(argv):
    command, args = argv[0], argv[1:]
    p = client()
    if command == "trigger":
        channel, event, data = args[0], args[1], json.loads(args[2])
        socket_id = args[3] if len(args) > 3 else None
        answer = p.trigger(channel, event, data, socket_id)
    elif command == "authenticate":
        channel, socket_id = args[0], args[1]
        custom_data = json.loads(args[2]) if len(args) > 2 else None
        answer = p.authenticate(channel=channel, socket_id=socket_id, custom_data=custom_data)
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv[1:])

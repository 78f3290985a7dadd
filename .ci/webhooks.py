"""Checks gymapi's webhook signatures with an independent implementation: the `standardwebhooks`
package from PyPI.

Starts `gymapi serve` on a fresh SQLite database and a receiver on loopback, adds an endpoint with
the operators' CLI, causes every event type (member.created, member.updated, import.completed,
ping, and a sale at the counter's purchase.created and purchase.updated), rotates the secret and
causes one more, then verifies that every event arrived once and every delivery's signature.

Usage: python .ci/webhooks.py path/to/gymapi
"""

import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

received = []
lock = threading.Lock()


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with lock:
            received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    binary = sys.argv[1]
    workdir = tempfile.mkdtemp()
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"sqlite://{workdir}/gymapi.db?mode=rwc",
        GYMAPI_WEBHOOK_ALLOW_PRIVATE="1",
        GYMAPI_RATE_LIMIT_PER_MINUTE="10000",
    )
    env.pop("REDIS_URL", None)

    def cli(*args):
        out = subprocess.run([binary, *args, "--json"], env=env, check=True, capture_output=True, text=True)
        return json.loads(out.stdout)

    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"

    gym = cli("gym", "create", "--name", "Webhook check")["id"]
    key = cli("key", "create", "--gym", gym, "--env", "live", "--name", "ci")["key"]
    endpoint = cli("webhook", "create", "--gym", gym, "--url", hook_url)
    first_secret = endpoint["secret"]

    port = free_port()
    server = subprocess.Popen(
        [binary, "serve", "--bind", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/api/v1"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                time.sleep(0.1)

        def call(method, path, body):
            req = urllib.request.Request(
                base + path,
                method=method,
                data=json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            return json.load(urllib.request.urlopen(req))

        member = call("POST", "/members", {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com"})
        call("PATCH", f"/members/{member['id']}", {"city": "London"})
        call("POST", "/import/members", {"rows": [{"legacy_id": "M-1", "first_name": "Old", "last_name": "System"}]})
        cli("webhook", "ping", endpoint["id"])
        # A sale at the counter: ordered (purchase.created), paid at the terminal (purchase.updated).
        row = {"legacy_id": "BAR", "name": "Protein bar", "price": {"amount": 250, "currency": "EUR"}}
        call("POST", "/import/products", {"rows": [row]})
        product = json.load(urllib.request.urlopen(urllib.request.Request(
            base + "/products", headers={"Authorization": f"Bearer {key}"})))["data"][0]["id"]
        terminal = call("POST", "/devices/devices", {"kind": "card_terminal", "name": "Till"})["id"]
        call("POST", "/devices/orders", {"lines": [{"product_id": product, "quantity": 1}]})
        job = json.load(urllib.request.urlopen(urllib.request.Request(
            f"{base}/devices/terminals/{terminal}/jobs", headers={"Authorization": f"Bearer {key}"})))["data"][0]
        approved = {"outcome": "approved", "card_scheme": "visa", "card_last4": "4242"}
        call("POST", f"/devices/terminals/{terminal}/jobs/{job['id']}/report", approved)
        second_secret = cli("webhook", "rotate-secret", endpoint["id"])["secret"]
        call("POST", "/members", {"first_name": "Grace", "last_name": "Hopper"})

        deadline = time.time() + 30
        while time.time() < deadline:
            with lock:
                if len(received) >= 8:
                    break
            time.sleep(0.1)
        # A duplicate would come after the expected ones: give it the time to.
        time.sleep(1.0)
    finally:
        server.terminate()
        server.wait()
        receiver.shutdown()

    with lock:
        got = list(received)
    types = [json.loads(body)["type"] for _, body in got]
    expected = ["member.created", "member.updated", "import.completed", "import.completed", "ping",
                "purchase.created", "purchase.updated", "member.created"]
    if sorted(types) != sorted(expected):
        sys.exit(f"expected the events {expected}, received {types}")
    for i, (headers, body) in enumerate(got):
        # Sent after the rotation: signed with both secrets (the first one stays valid for 24 h).
        after_rotation = (json.loads(body)["data"] or {}).get("first_name") == "Grace"
        secrets = [first_secret, second_secret] if after_rotation else [first_secret]
        for secret in secrets:
            try:
                event = Webhook(secret).verify(body, headers)
            except WebhookVerificationError as e:
                sys.exit(f"delivery {i} ({types[i]}) does not verify with {'new' if secret == second_secret else 'first'} secret: {e}")
            if event["id"] != headers["webhook-id"]:
                sys.exit(f"delivery {i}: webhook-id {headers['webhook-id']} is not the event id {event['id']}")
    print(f"{len(got)} deliveries verified by standardwebhooks: {', '.join(types)}; the last with both secrets after rotation")


if __name__ == "__main__":
    main()

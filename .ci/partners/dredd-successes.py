"""Whether Dredd's run over a document passed every operation's success.

Dredd's OpenAPI 3 support makes a transaction of every response a document names and sends each
the operation's example request; only each operation's first 2xx can pass against a live server.
This reads Dredd's output, takes each operation's first 2xx transaction (the path's example ids
read back as `{id}`), prints how many passed and exits 1 if one failed that EXCEPTIONS does not
name with its reason.

Usage: python3 dredd-successes.py DOCUMENT DREDD_OUTPUT
"""

import re
import sys

# Operations whose success needs what a sandbox fixture cannot hold, with why (openapi.yaml says
# the same in its `Sandbox` tag).
EXCEPTIONS = {
    "openapi.yaml": {
        "GET /webhook-deliveries/{id}": "a delivery needs a webhook endpoint, which gym users set up",
        "POST /webhook-deliveries/{id}/redeliver": "a delivery needs a webhook endpoint, which gym users set up",
    },
    "openapi-devices.yaml": {},
}
FIXTURE_ID = re.compile(r"/0192f7c4-[0-9a-f]{4}-7cc1-a8e3-5b8f4d1e2a90")


def main():
    document, output = sys.argv[1], sys.argv[2]
    exceptions = EXCEPTIONS[document]
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(output).read())
    first = {}
    for result, method, status, uri in re.findall(r"^(pass|fail|error): (\w+) \((\d+)\) (\S+) duration", text, re.M):
        operation = f"{method} {FIXTURE_ID.sub('/{id}', uri.split('?')[0])}"
        if status.startswith("2") and operation not in first:
            first[operation] = result
    if not first:
        sys.exit("Dredd ran no transaction:\n" + text[-3000:])
    passed = [op for op, r in first.items() if r == "pass"]
    failed = sorted(op for op, r in first.items() if r != "pass" and op not in exceptions)
    print(f"  {document}: {len(passed)} of {len(first)} operations' successes pass")
    for op, why in exceptions.items():
        print(f"    exception: {op} ({first.get(op, 'not run')}): {why}")
    for op in failed:
        print(f"  FAILED: {op}")
    if failed:
        print(text[-6000:])
        sys.exit(1)


main()

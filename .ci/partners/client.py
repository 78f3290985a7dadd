"""A partner's first program against gymapi in Python, on the client openapi-python-client
generates from openapi.yaml (package `sdk`), checked with `mypy --strict`: it creates members with
an Idempotency-Key (and sends one again), walks the member list page by page passing `meta.as_of`
and `meta.next_page` back as they came, filters by a time with an offset, and reads a 422 and a
401 through the one discriminator `error.type`. Run against a live server with GYMAPI_URL
(http://host:port) and GYMAPI_KEY set.
"""

import datetime
import os

from sdk import AuthenticatedClient
from sdk.api.members import create_member, list_members
from sdk.models import ErrorBody, Member, MemberCreate, MemberList, ValidationError
from sdk.types import UNSET, Unset


def create(api: AuthenticatedClient, first: str, last: str) -> tuple[Member, bool]:
    email = f"{first.lower()}.py@example.com"
    answer = create_member.sync_detailed(
        client=api, body=MemberCreate(first_name=first, last_name=last, email=email), idempotency_key=f"py-{email}"
    )
    if not isinstance(answer.parsed, Member):
        raise SystemExit(f"creating {email} answered {answer.status_code}")
    return answer.parsed, answer.headers.get("Idempotency-Replayed") == "true"


def walk(api: AuthenticatedClient, since: datetime.datetime | Unset = UNSET) -> list[Member]:
    seen: list[Member] = []
    page: int | None = 1
    as_of: datetime.datetime | Unset = UNSET
    while page is not None:
        listed = list_members.sync(client=api, page=page, per_page=2, as_of=as_of, updated_since=since)
        if not isinstance(listed, MemberList):
            raise SystemExit(f"page {page}: {listed}")
        seen += listed.data
        page, as_of = listed.meta.next_page, listed.meta.as_of
    return seen


def refused(api: AuthenticatedClient) -> None:
    bad = create_member.sync(client=api, body=MemberCreate(first_name="", last_name="Refused", email="not an address"))
    if not isinstance(bad, ValidationError) or bad.error.type_ != "validation_failed":
        raise SystemExit(f"expected a 422, got {bad}")
    print(f"422 {bad.error.type_}: {', '.join(sorted(bad.errors.additional_properties))}")
    stranger = AuthenticatedClient(base_url=api._base_url, token="svc_live_" + "0" * 38)
    denied = list_members.sync(client=stranger)
    if not isinstance(denied, ErrorBody) or denied.error.type_ != "unauthorized":
        raise SystemExit(f"expected a 401, got {denied}")
    print(f"401 {denied.error.type_}")


def main() -> None:
    api = AuthenticatedClient(base_url=os.environ["GYMAPI_URL"] + "/api/v1", token=os.environ["GYMAPI_KEY"])
    before = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=-5)))
    made = [create(api, first, last)[0] for first, last in (("Ada", "Lovelace"), ("Grace", "Hopper"), ("Alan", "Turing"))]
    again, replayed = create(api, "Ada", "Lovelace")
    if again.id != made[0].id or not replayed:
        raise SystemExit("a keyed create ran twice")
    walked = walk(api)
    if {m.id for m in made} - {m.id for m in walked}:
        raise SystemExit("the walk missed members")
    print(f"walked {len(walked)} members in pages of 2, as_of passed back as a datetime")
    recent = walk(api, since=before - datetime.timedelta(seconds=1))
    print(f"{len(recent)} updated since {before.isoformat()}")
    if len(recent) != len(made):
        raise SystemExit("updated_since with an offset missed members")
    refused(api)


if __name__ == "__main__":
    main()

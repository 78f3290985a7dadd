// A partner's first program against gymapi, typed by openapi-typescript from openapi.yaml and
// checked with `tsc --strict`: it creates members with an Idempotency-Key (and sends one again),
// walks the member list page by page without parsing a URL, and narrows a 422 without a cast.
// Run against a live server with GYMAPI_URL (http://host:port) and GYMAPI_KEY set.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Member = components["schemas"]["Member"];
type MemberList = components["schemas"]["MemberList"];

const base = process.env.GYMAPI_URL;
const key = process.env.GYMAPI_KEY;
if (!base || !key) {
  throw new Error("set GYMAPI_URL and GYMAPI_KEY");
}
const api = createClient<paths>({ baseUrl: `${base}/api/v1`, headers: { Authorization: `Bearer ${key}` } });

async function createMember(first: string, last: string, email: string): Promise<[Member, boolean]> {
  const { data, error, response } = await api.POST("/members", {
    params: { header: { "Idempotency-Key": `partner-${email}` } },
    body: { first_name: first, last_name: last, email },
  });
  if (error) {
    throw new Error(`creating ${email} answered ${response.status}`);
  }
  return [data, response.headers.get("Idempotency-Replayed") === "true"];
}

async function memberPage(page: number, perPage: number, asOf: string | undefined): Promise<MemberList> {
  const { data, error, response } = await api.GET("/members", {
    params: { query: { page, per_page: perPage, as_of: asOf } },
  });
  if (error) {
    throw new Error(`page ${page} answered ${response.status}`);
  }
  return data;
}

async function walkMembers(perPage: number): Promise<Member[]> {
  const seen: Member[] = [];
  let page: number | null = 1;
  let asOf: string | undefined;
  let pages = 0;
  while (page !== null) {
    const list = await memberPage(page, perPage, asOf);
    seen.push(...list.data);
    pages += 1;
    page = list.meta.next_page;
    asOf = list.meta.as_of;
  }
  console.log(`walked ${seen.length} members in ${pages} pages of ${perPage}`);
  return seen;
}

async function refused(): Promise<void> {
  const { data, error, response } = await api.POST("/members", {
    body: { first_name: "", last_name: "Refused", email: "not an address" },
  });
  if (data) {
    throw new Error("an invalid member was created");
  }
  if (error && "errors" in error) {
    // Narrowed to ValidationError: `type`, `message` and `errors` by field.
    console.log(`${response.status} ${error.type}: ${error.message}`);
    for (const [field, problems] of Object.entries(error.errors)) {
      console.log(`  ${field}: ${problems.join("; ")}`);
    }
  } else if (error) {
    // Every other error body: `{"error": {"type", "message"}}`.
    throw new Error(`expected a 422, got ${response.status} ${error.error.type}`);
  }
}

async function main(): Promise<void> {
  const people: [string, string][] = [["Ada", "Lovelace"], ["Grace", "Hopper"], ["Edsger", "Dijkstra"]];
  const made: Member[] = [];
  for (const [first, last] of people) {
    const [member, replayed] = await createMember(first, last, `${first.toLowerCase()}@example.com`);
    console.log(`created ${member.id} ${member.first_name} ${member.last_name} (replayed: ${replayed})`);
    made.push(member);
  }
  const [again, replayed] = await createMember("Ada", "Lovelace", "ada@example.com");
  const same = again.id === made[0]?.id;
  console.log(`sent again with the same key: ${same ? "the same member" : "a new member"} (replayed: ${replayed})`);
  if (!same || !replayed) {
    throw new Error("a keyed create ran twice");
  }
  const walked = await walkMembers(2);
  const missing = made.filter((m) => !walked.some((w) => w.id === m.id));
  if (missing.length > 0) {
    throw new Error(`the walk missed ${missing.length} members`);
  }
  await refused();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

// Drives the settings area in headless Chromium (playwright-core), as a gym owner and an employee
// would, checks every page with axe-core, and saves screenshots under target/screenshots/.
//
// Run by tests/browser/run.sh, which starts gymapi and creates the gym and its users:
//   BASE=http://127.0.0.1:PORT OWNER=... EMPLOYEE=... PASSWORD=... node tests/browser/settings.mjs

import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(process.env.NODE_MODULES + "/");
const { chromium } = require("playwright-core");
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

const { BASE, OWNER, EMPLOYEE, PASSWORD, DEVICE_KEY, SHOTS = "target/screenshots" } = process.env;
mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const problems = [];

async function check(page, name) {
  // Every page: no serious or critical accessibility violation, and a screenshot.
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  for (const v of result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")) {
    problems.push(`${name}: ${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  }
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}

async function api(key, path, expected) {
  const r = await fetch(`${BASE}/api/v1${path}`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(r.status, expected, `${path} with the key answered ${r.status}, expected ${expected}`);
}

// The front-desk app's side: the device API with the gym's device key.
async function device(method, path, body) {
  const r = await fetch(`${BASE}/api/v1/devices${path}`, {
    method,
    headers: { Authorization: `Bearer ${DEVICE_KEY}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

async function signIn(context, email, name) {
  const page = await context.newPage();
  await page.goto(`${BASE}/settings`);
  assert.match(page.url(), /\/settings\/sign-in$/);
  await check(page, `${name}-sign-in`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/settings\/integrations\/api$/);
  return page;
}

// --- the owner, on a laptop ------------------------------------------------------------------------
{
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: BASE });
  const page = await signIn(context, OWNER, "owner");
  await check(page, "owner-api-integration");

  // Create a live key: shown once, copied with the button, working against the API.
  await page.getByLabel("Name").fill("Front desk");
  await page.getByLabel("Environment").selectOption("live");
  await page.getByRole("button", { name: "Create key" }).click();
  const key = await page.getByLabel("The new API key").inputValue();
  assert.match(key, /^svc_live_/);
  await page.getByRole("button", { name: "Copy" }).click();
  await page.getByText("Copied").waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key);
  await check(page, "owner-key-created");
  await api(key, "/members", 200);

  // A test key needs the sandbox.
  await page.getByLabel("Name").fill("CI");
  await page.getByLabel("Environment").selectOption("test");
  await page.getByRole("button", { name: "Create key" }).click();
  await page.getByText("Provision a sandbox first to create a test key.").waitFor();
  await page.getByRole("button", { name: "Provision sandbox" }).click();
  await page.getByText("Provisioned on").waitFor();
  await page.getByLabel("Name").fill("CI");
  await page.getByLabel("Environment").selectOption("test");
  await page.getByRole("button", { name: "Create key" }).click();
  const testKey = await page.getByLabel("The new API key").inputValue();
  assert.match(testKey, /^svc_test_/);
  await api(testKey, "/members", 200);

  // Roll the live key: confirmation, new key, "Retires in" on the old one.
  const row = page.getByRole("row", { name: /Front desk/ }).first();
  await row.getByRole("link", { name: "Roll" }).click();
  await check(page, "owner-confirm-roll");
  await page.getByRole("button", { name: "Roll key" }).click();
  const rolled = await page.getByLabel("The new API key").inputValue();
  assert.notEqual(rolled, key);
  await page.getByText(/Retires in/).first().waitFor();
  await api(key, "/members", 200); // during its grace

  // Revoke the new key: the API answers 401 at once.
  const fresh = page.getByRole("row").filter({ hasText: rolled.slice(0, 13) });
  await fresh.getByRole("link", { name: "Revoke" }).click();
  await check(page, "owner-confirm-revoke");
  await page.getByRole("button", { name: "Revoke key" }).click();
  await page.getByText("Revoked").first().waitFor();
  await api(rolled, "/members", 401);
  await page.reload();
  await page.getByRole("heading", { name: "API requests per day" }).waitFor();
  await page.getByText(/Front desk \(svc_live_.*\) · \d+ requests?/).first().waitFor();
  await check(page, "owner-api-integration-after");

  // Webhooks: add an endpoint (secret shown once), ping it.
  await page.getByRole("link", { name: "Webhooks" }).click();
  await check(page, "owner-webhooks-empty");
  await page.getByLabel("URL (https)").fill("https://example.com/webhooks/gymapi");
  await page.getByLabel("member.created").check();
  await page.getByRole("button", { name: "Add endpoint" }).click();
  const secret = await page.getByLabel("The signing secret").inputValue();
  assert.match(secret, /^whsec_/);
  await page.getByRole("button", { name: /Send ping/ }).click();
  await page.getByRole("cell", { name: "ping" }).first().waitFor();
  await check(page, "owner-webhooks");

  // Devices: none yet; the front-desk app registers a door, which shows online once heard from;
  // the owner renames it, then removes it.
  await page.getByRole("link", { name: "Devices" }).click();
  await page.getByText("No devices yet.").waitFor();
  await check(page, "owner-devices-empty");
  const door = await device("POST", "/devices", { kind: "door", name: "Back door" });
  assert.equal(door.status, 201);
  assert.equal((await device("POST", `/devices/${door.body.id}/heartbeat`)).status, 200);
  await page.reload();
  const doorRow = page.getByRole("row", { name: /Back door/ });
  await doorRow.getByText("Online").waitFor();
  await check(page, "owner-devices");
  await doorRow.getByRole("link", { name: "Edit Back door" }).click();
  await check(page, "owner-device-edit");
  await page.getByLabel("Name", { exact: true }).fill("Garden door");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByRole("row", { name: /Garden door/ }).waitFor();
  assert.equal((await device("GET", `/devices/${door.body.id}`)).body.name, "Garden door");
  await page.getByRole("link", { name: "Edit Garden door" }).click();
  await page.getByRole("button", { name: "Remove device" }).click();
  await page.getByText("No devices yet.").waitFor();
  assert.equal((await device("GET", `/devices/${door.body.id}`)).status, 404);
  assert.equal((await device("POST", "/devices", { kind: "doorbell", name: "Counter bell" })).status, 201);

  // The counter: a terminal declines a kiosk's order; its row shows the waiting payments and why.
  const terminal = await device("POST", "/devices", { kind: "card_terminal", name: "Counter terminal" });
  assert.equal(terminal.status, 201);
  const imported = await fetch(`${BASE}/api/v1/import/products`, {
    method: "POST",
    headers: { Authorization: `Bearer ${DEVICE_KEY}`, "Content-Type": "application/json" },
    body: JSON.stringify({ rows: [{ legacy_id: "BAR", name: "Protein bar", price: { amount: 250, currency: "EUR" } }] }),
  });
  assert.equal(imported.status, 200);
  const products = await fetch(`${BASE}/api/v1/products`, { headers: { Authorization: `Bearer ${DEVICE_KEY}` } });
  const product = (await products.json()).data[0];
  for (let i = 0; i < 2; i++) {
    assert.equal((await device("POST", "/orders", { lines: [{ product_id: product.id, quantity: 1 }] })).status, 201);
  }
  const job = (await device("GET", `/terminals/${terminal.body.id}/jobs`)).body.data[0];
  const report = { outcome: "declined", reason: "Card blocked" };
  assert.equal((await device("POST", `/terminals/${terminal.body.id}/jobs/${job.id}/report`, report)).status, 200);
  await page.reload();
  const till = page.getByRole("row", { name: /Counter terminal/ });
  await till.getByText("1 payment waiting").waitFor();
  await till.getByText(/Last error: Card blocked/).waitFor();
  await check(page, "owner-devices-counter");

  // Facilities: a second studio added on the page; a door there denies a member of the main
  // facility; archived, it hands its member and its door back to the main facility.
  const integration = async (method, path, body) => {
    const r = await fetch(`${BASE}/api/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${DEVICE_KEY}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
  };
  await page.getByRole("link", { name: "Facilities" }).click();
  await page.getByRole("row", { name: /Main facility/ }).first().waitFor();
  await check(page, "owner-facilities");
  await page.getByLabel("Name").fill("Moon base");
  await page.getByLabel("Time zone (optional: the gym's)").fill("Mars/Base");
  await page.getByRole("button", { name: "Add facility" }).click();
  await page.getByText(/Unknown time zone "Mars\/Base"/).waitFor();
  await page.getByLabel("Name").fill("Riverside studio");
  await page.getByLabel("Address (optional)").fill("1 River Road");
  await page.getByLabel("Time zone (optional: the gym's)").fill("Europe/London");
  await page.getByLabel("Environment").selectOption("live");
  await page.getByRole("button", { name: "Add facility" }).click();
  await page.getByRole("row", { name: /Riverside studio/ }).waitFor();
  const listed = (await integration("GET", "/facilities")).body;
  assert.equal(listed.meta.total, 2);
  const river = listed.data.find((f) => f.name === "Riverside studio");
  const main = listed.data.find((f) => f.name === "Main facility");
  assert.equal(river.timezone, "Europe/London");
  const ada = await integration("POST", "/members", { first_name: "Ada", last_name: "Main" });
  assert.equal(ada.body.facility_id, main.id);
  const bo = await integration("POST", "/members", { first_name: "Bo", last_name: "River", facility_id: river.id });
  assert.equal(bo.status, 201);
  const riverDoor = await device("POST", "/devices", { kind: "door", name: "River door", facility_id: river.id });
  const denied = await device("POST", `/doors/${riverDoor.body.id}/access`, { member_id: ada.body.id });
  assert.equal(denied.body.reason, "wrong_facility");
  assert.equal((await integration("GET", "/statistics")).body.facilities, 2);
  await page.getByRole("link", { name: "Edit Riverside studio" }).click();
  await check(page, "owner-facility-edit");
  await page.getByLabel("Move its members and devices to").selectOption({ label: "Main facility" });
  await page.getByRole("button", { name: "Archive facility" }).click();
  await page.getByRole("row", { name: /Riverside studio/ }).getByText(/Archived/).waitFor();
  assert.equal((await integration("GET", `/members/${bo.body.id}`)).body.facility_id, main.id);
  assert.equal((await device("GET", `/devices/${riverDoor.body.id}`)).body.facility_id, main.id);
  assert.equal((await integration("GET", "/statistics")).body.facilities, 1);

  // A form posted from elsewhere (no CSRF token) is refused.
  const forged = await page.request.post(`${BASE}/settings/integrations/api/keys`, {
    form: { name: "Forged", environment: "live" },
  });
  assert.equal(forged.status(), 403);
  await context.close();
}

// --- an employee without the permission, on a phone -------------------------------------------------
{
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, bypassCSP: true });
  const page = await signIn(context, EMPLOYEE, "employee");
  await check(page, "employee-api-integration-phone");
  assert.equal(await page.getByRole("button", { name: "Create key" }).count(), 0);
  assert.equal(await page.getByRole("link", { name: "Roll" }).count(), 0);
  const csrf = await page.locator('input[name="csrf"]').first().inputValue();
  const direct = await page.request.post(`${BASE}/settings/integrations/api/keys`, {
    form: { csrf, name: "Sneaky", environment: "live" },
  });
  assert.equal(direct.status(), 403);
  await page.getByRole("link", { name: "Webhooks" }).click();
  await check(page, "employee-webhooks-phone");
  assert.equal(await page.getByRole("button", { name: "Add endpoint" }).count(), 0);
  await page.getByRole("link", { name: "Facilities" }).click();
  await page.getByRole("row", { name: /Riverside studio/ }).waitFor();
  assert.equal(await page.getByRole("button", { name: "Add facility" }).count(), 0);
  await check(page, "employee-facilities-phone");
  await page.getByRole("link", { name: "Devices" }).click();
  await page.getByRole("row", { name: /Counter bell/ }).waitFor();
  assert.equal(await page.getByRole("link", { name: /^Edit/ }).count(), 0);
  await check(page, "employee-devices-phone");
  await context.close();
}

await browser.close();
if (problems.length) {
  console.error("Accessibility problems:\n" + problems.join("\n"));
  process.exit(1);
}
console.log(`settings area: every step passed; screenshots in ${SHOTS}`);

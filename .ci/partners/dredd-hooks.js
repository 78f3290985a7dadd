// Dredd hooks for both documents (.ci/partners/dredd.sh runs them against `gymapi serve --demo`).
//
// Dredd's OpenAPI 3 support makes a transaction of every response a document names (`default`
// read as 200) and sends each operation's examples. A contract test of a live service can only
// provoke an operation's success, so these hooks keep one transaction per operation, its first
// 2xx, skip the others, and give each kept request what a partner's program would have: the ids
// of records that exist, in the state the operation acts on (a ring not yet answered, an order
// whose payment was declined, a receipt whose printing failed), made through the API itself
// just before, and a fresh Idempotency-Key. Dredd then checks the answer's status, headers and
// body against the document: the body against the response's schema and the headers it requires
// (.ci/partners/dredd-expectations.py says why Dredd needs them handed over).
//
// Environment: GYMAPI_KEY (the demo's live key), GYMAPI_ORIGIN (http://127.0.0.1:PORT),
// GYMAPI_EXPECTATIONS (the file dredd-expectations.py printed for the document under test).
const hooks = require('hooks');
const http = require('http');
const crypto = require('crypto');

const ORIGIN = new URL(process.env.GYMAPI_ORIGIN);
const KEY = process.env.GYMAPI_KEY;
const EXPECTATIONS = JSON.parse(require('fs').readFileSync(process.env.GYMAPI_EXPECTATIONS, 'utf8'));

function call(method, path, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = { Authorization: `Bearer ${KEY}`, Accept: 'application/json' };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Idempotency-Key'] = crypto.randomUUID();
    }
    const req = http.request({ host: ORIGIN.hostname, port: ORIGIN.port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { text += chunk; });
      res.on('end', () => {
        if (res.statusCode >= 300) {
          reject(new Error(`${method} ${path} answered ${res.statusCode}: ${text}`));
          return;
        }
        resolve(text ? JSON.parse(text) : null);
      });
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

const api = (method, path, body) => call(method, `/api/v1${path}`, body);
const devices = (method, path, body) => call(method, `/api/v1/devices${path}`, body);
const first = async (path, call_ = api) => {
  const page = await call_('GET', `${path}${path.includes('?') ? '&' : '?'}per_page=1`);
  if (!page.data.length) throw new Error(`GET ${path}: nothing listed`);
  return page.data[0].id;
};

// The demo's front desk: a door, a doorbell, a kiosk, a card terminal and a fiscal printer.
let desk;
async function frontDesk() {
  if (desk) return desk;
  const listed = await devices('GET', '/devices?per_page=100');
  const pick = (kind) => {
    const d = listed.data.find((x) => x.kind === kind && x.facility_id);
    if (!d) throw new Error(`the demo has no ${kind}`);
    return d;
  };
  const door = pick('door');
  const of = (kind) => listed.data.find((x) => x.kind === kind && x.facility_id === door.facility_id) || pick(kind);
  desk = { door, doorbell: of('doorbell'), kiosk: of('kiosk'), terminal: of('card_terminal'), printer: of('fiscal_printer') };
  desk.product = await first('/products?status=active');
  return desk;
}

async function ring() {
  const { doorbell } = await frontDesk();
  return (await devices('POST', `/doorbells/${doorbell.id}/rings`, {})).id;
}

// The job a terminal or printer is handed for `orderId`: each is handed one job at a time, oldest
// first, so the jobs of orders made before (for earlier operations, or by the demo) are settled
// on the way: declined at the terminal, printed at the printer.
async function jobFor(kind, deviceId, orderId) {
  for (let i = 0; i < 50; i += 1) {
    const [job] = (await devices('GET', `/${kind}/${deviceId}/jobs?wait=0`)).data;
    if (!job) break;
    if (job.order_id === orderId) return job.id;
    const settle = kind === 'terminals' ? { outcome: 'declined', reason: 'settled by the contract test' } : { outcome: 'printed' };
    await devices('POST', `/${kind}/${deviceId}/jobs/${job.id}/report`, settle);
  }
  throw new Error(`no ${kind} job for order ${orderId}`);
}

// An order, and how far its payment and receipt have gone: `pending` (no terminal took it),
// `held` (a terminal holds its payment), `failed` (declined), `printing` (paid, its receipt at the
// printer), `reprintable` (paid, its receipt's printing failed).
async function order(state) {
  const { kiosk, terminal, printer, product } = await frontDesk();
  const made = await devices('POST', '/orders', { device_id: kiosk.id, lines: [{ product_id: product, quantity: 1 }] });
  if (state === 'pending') return { order: made.id };
  const job = await jobFor('terminals', terminal.id, made.id);
  if (state === 'held') return { order: made.id, job };
  const outcome = state === 'failed' ? { outcome: 'declined', reason: 'insufficient funds' }
    : { outcome: 'approved', card_scheme: 'visa', card_last4: '4242' };
  await devices('POST', `/terminals/${terminal.id}/jobs/${job}/report`, outcome);
  if (state === 'failed') return { order: made.id };
  const print = await jobFor('printers', printer.id, made.id);
  if (state === 'printing') return { order: made.id, job: print };
  await devices('POST', `/printers/${printer.id}/jobs/${print}/report`, { outcome: 'failed', reason: 'paper jam' });
  return { order: made.id };
}

// The path of an operation on the first record of a list, or on one of the front desk's devices.
const firstOf = (list) => async () => ({ path: { id: await first(list) } });
const deviceOf = (kind) => async () => ({ path: { device_id: (await frontDesk())[kind].id } });

// Per operation (method and path template): the path's parameters and, where the document's
// example names records, the body's fields.
const prepare = {
  'GET /members/{id}': firstOf('/members'),
  'PUT /members/{id}': firstOf('/members'),
  'PATCH /members/{id}': firstOf('/members'),
  'GET /members/{id}/memberships': firstOf('/members'),
  'GET /member-memberships/{id}': firstOf('/member-memberships'),
  'GET /memberships/{id}': firstOf('/memberships'),
  'GET /membership-subscriptions/{id}': firstOf('/membership-subscriptions'),
  'GET /products/{id}': firstOf('/products'),
  'GET /purchases/{id}': firstOf('/purchases'),
  'GET /facilities/{id}': firstOf('/facilities'),
  'GET /events/{id}': firstOf('/events'),
  'GET /webhook-deliveries/{id}': firstOf('/webhook-deliveries'),
  'POST /webhook-deliveries/{id}/redeliver': firstOf('/webhook-deliveries'),
  'GET /devices/{device_id}': deviceOf('door'),
  'PATCH /devices/{device_id}': async () => {
    const { door } = await frontDesk();
    return { path: { device_id: door.id }, body: { facility_id: door.facility_id } };
  },
  'POST /devices/{device_id}/heartbeat': deviceOf('door'),
  'POST /doors/{device_id}/access': deviceOf('door'),
  'GET /doors/{device_id}/commands': deviceOf('door'),
  'POST /doors/{device_id}/commands/{command_id}/ack': async () => {
    const { door } = await frontDesk();
    await devices('POST', `/rings/${await ring()}/open`, { door_id: door.id });
    const commands = await devices('GET', `/doors/${door.id}/commands?wait=0`);
    return { path: { device_id: door.id, command_id: commands.data[0].id } };
  },
  'POST /doorbells/{device_id}/rings': deviceOf('doorbell'),
  'POST /rings/{ring_id}/open': async () => ({ path: { ring_id: await ring() }, body: { door_id: (await frontDesk()).door.id } }),
  'POST /rings/{ring_id}/dismiss': async () => ({ path: { ring_id: await ring() } }),
  'POST /orders': async () => {
    const { kiosk, product } = await frontDesk();
    return { body: { device_id: kiosk.id, lines: [{ product_id: product, quantity: 2 }] } };
  },
  'GET /orders/{order_id}': async () => ({ path: { order_id: (await order('pending')).order } }),
  'POST /orders/{order_id}/retry-payment': async () => ({ path: { order_id: (await order('failed')).order } }),
  'POST /orders/{order_id}/cancel': async () => ({ path: { order_id: (await order('pending')).order } }),
  'POST /orders/{order_id}/reprint': async () => ({ path: { order_id: (await order('reprintable')).order } }),
  'GET /terminals/{device_id}/jobs': deviceOf('terminal'),
  'POST /terminals/{device_id}/jobs/{job_id}/report': async () => {
    const { terminal } = await frontDesk();
    return { path: { device_id: terminal.id, job_id: (await order('held')).job } };
  },
  // Only a test key empties its sandbox (a live key is 403).
  'POST /sandbox/reset': async () => ({ headers: { Authorization: `Bearer ${process.env.GYMAPI_TEST_KEY}` } }),
  'GET /printers/{device_id}/jobs': deviceOf('printer'),
  'POST /printers/{device_id}/jobs/{job_id}/report': async () => {
    const { printer } = await frontDesk();
    return { path: { device_id: printer.id, job_id: (await order('printing')).job } };
  },
};

// The example email is the same in `createMember` and `importMembers`; a gym's emails are unique.
const uniqueEmails = (body) => JSON.stringify(body).replace(/ada@example\.com/g, () => `ada+${crypto.randomUUID()}@example.com`);

const kept = new Set();
hooks.beforeEach((transaction, done) => {
  const template = transaction.origin.resourceName;
  const operation = `${transaction.request.method} ${template}`;
  const status = parseInt(transaction.expected.statusCode, 10);
  if (kept.has(operation) || status < 200 || status >= 300) {
    transaction.skip = true;
    done();
    return;
  }
  kept.add(operation);
  const expectation = EXPECTATIONS[operation];
  if (!expectation) {
    transaction.fail = `${operation} is not in the document's expectations`;
    done();
    return;
  }
  if (expectation.schema) transaction.expected.bodySchema = expectation.schema;
  const optional = new Set(expectation.optional_headers.map((h) => h.toLowerCase()));
  for (const h of Object.keys(transaction.expected.headers)) if (optional.has(h.toLowerCase())) delete transaction.expected.headers[h];
  // Each keyed write its own key (the document's example key is one for every operation).
  const headers = transaction.request.headers;
  for (const h of Object.keys(headers)) if (h.toLowerCase() === 'idempotency-key') headers[h] = crypto.randomUUID();
  // Long polls answer at once: the document's default wait is 0, its example may not be.
  const query = (transaction.request.uri.split('?')[1] || '').replace(/(^|&)wait=\d+/, '$1wait=0');
  const fill = prepare[operation] || (async () => ({}));
  fill().then((made) => {
    let path = made.path ? template : transaction.request.uri.split('?')[0];
    for (const [name, value] of Object.entries(made.path || {})) path = path.replace(`{${name}}`, value);
    const uri = query ? `${path}?${query}` : path;
    // Dredd sends `fullPath`: the server's base path, then the operation's `uri`.
    transaction.fullPath = transaction.fullPath.slice(0, transaction.fullPath.length - transaction.request.uri.length) + uri;
    transaction.request.uri = uri;
    for (const [name, value] of Object.entries(made.headers || {})) {
      for (const h of Object.keys(transaction.request.headers)) if (h.toLowerCase() === name.toLowerCase()) delete transaction.request.headers[h];
      transaction.request.headers[name] = value;
    }
    if (made.body) transaction.request.body = JSON.stringify(made.body);
    else if (transaction.request.body) transaction.request.body = uniqueEmails(JSON.parse(transaction.request.body));
    done();
  }, (error) => {
    transaction.fail = `preparing ${operation}: ${error.message}`;
    done();
  });
});

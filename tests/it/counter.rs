//! The counter over HTTP: a kiosk's order, the card terminal's payment, the fiscal printer's
//! receipt, and what the integration API, the statistics and the webhooks see of each sale;
//! every answer checked against its document.

use std::{collections::HashMap, time::Duration};

use serde_json::{Value, json};

use crate::common::{Gym, TestApp};

/// A gym's counter: a kiosk, a card terminal and a fiscal printer at its first facility, and two
/// products (a bar at 2.50 EUR, water at 1.20 EUR) and an archived one, and one priced in USD.
pub struct Counter {
    pub gym: Gym,
    pub kiosk: String,
    pub terminal: String,
    pub printer: String,
    pub products: HashMap<&'static str, String>,
}

pub async fn register(app: &TestApp, key: &str, kind: &str, name: &str) -> String {
    let r = app.device("POST", "/devices", key, Some(json!({"kind": kind, "name": name})), &[]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_str().unwrap().to_string()
}

pub async fn counter(app: &TestApp, name: &str) -> Counter {
    let gym = app.gym(name).await;
    let k = gym.live_key.clone();
    let eur = |amount: i64| json!({"amount": amount, "currency": "EUR"});
    let rows = json!({"rows": [
        {"legacy_id": "BAR", "name": "Protein bar", "price": eur(250)},
        {"legacy_id": "WATER", "name": "Water", "price": eur(120)},
        {"legacy_id": "OLD", "name": "Old shake", "price": eur(300), "status": "inactive"},
        {"legacy_id": "USD", "name": "Imported gum", "price": {"amount": 99, "currency": "USD"}},
    ]});
    assert_eq!(app.post(&k, "/import/products", rows).await.status, 200);
    let list = app.get(&k, "/products?per_page=100").await.body;
    let mut products = HashMap::new();
    for p in list["data"].as_array().unwrap() {
        let legacy = match p["legacy_id"].as_str().unwrap() {
            "BAR" => "bar",
            "WATER" => "water",
            "OLD" => "old",
            _ => "usd",
        };
        products.insert(legacy, p["id"].as_str().unwrap().to_string());
    }
    let kiosk = register(app, &k, "kiosk", "Kiosk").await;
    let terminal = register(app, &k, "card_terminal", "Terminal").await;
    let printer = register(app, &k, "fiscal_printer", "Printer").await;
    Counter { gym, kiosk, terminal, printer, products }
}

impl Counter {
    pub fn key(&self) -> &str {
        &self.gym.live_key
    }

    pub async fn order(&self, app: &TestApp, lines: Value) -> crate::common::TestResponse {
        let body = json!({"device_id": self.kiosk, "lines": lines});
        app.device("POST", "/orders", self.key(), Some(body), &[]).await
    }

    pub async fn take_payment(&self, app: &TestApp, terminal: &str) -> Value {
        let r = app.device("GET", &format!("/terminals/{terminal}/jobs?wait=0"), self.key(), None, &[]).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["data"].clone()
    }

    pub async fn report_payment(
        &self,
        app: &TestApp,
        terminal: &str,
        job: &str,
        report: Value,
    ) -> crate::common::TestResponse {
        app.device("POST", &format!("/terminals/{terminal}/jobs/{job}/report"), self.key(), Some(report), &[]).await
    }

    pub async fn take_receipt(&self, app: &TestApp) -> Value {
        let path = format!("/printers/{}/jobs?wait=0", self.printer);
        let r = app.device("GET", &path, self.key(), None, &[]).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["data"].clone()
    }
}

pub fn approved() -> Value {
    json!({"outcome": "approved", "card_scheme": "visa", "card_last4": "4242"})
}

/// Order → the terminal takes it → approved → the sale is paid in `/purchases` and in the
/// statistics' revenue, with a receipt number → the printer takes the receipt → printed.
#[tokio::test]
async fn a_sale_goes_from_order_to_payment_to_receipt() {
    let app = TestApp::spawn().await;
    let c = counter(&app, "Counter").await;
    let lines =
        json!([{"product_id": c.products["bar"], "quantity": 2}, {"product_id": c.products["water"], "quantity": 1}]);
    let r = c.order(&app, lines).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let order = r.body;
    assert_eq!(
        (order["payment_status"].as_str(), order["total"].clone()),
        (Some("pending"), json!({"amount": 620, "currency": "EUR"}))
    );
    assert_eq!(order["lines"][0]["total"], json!({"amount": 500, "currency": "EUR"}));
    assert_eq!(order["payments"][0]["state"], "pending");
    let id = order["id"].as_str().unwrap();
    let sale = app.get(c.key(), &format!("/purchases/{id}")).await.body;
    assert_eq!(
        (sale["payment_status"].as_str(), sale["device_id"].as_str()),
        (Some("pending"), Some(c.kiosk.as_str()))
    );
    assert_eq!(sale["lines"].as_array().unwrap().len(), 2);

    let jobs = c.take_payment(&app, &c.terminal).await;
    assert_eq!((jobs[0]["state"].as_str(), jobs[0]["order_id"].as_str()), (Some("reserved"), Some(id)));
    assert_eq!(jobs[0]["amount"], json!({"amount": 620, "currency": "EUR"}));
    let job = jobs[0]["id"].as_str().unwrap();
    let too_long = json!({"outcome": "approved", "card_scheme": "visa", "card_last4": "4242424242424242"});
    assert_eq!(c.report_payment(&app, &c.terminal, job, too_long).await.status, 422, "a full card number is refused");
    let paid = c.report_payment(&app, &c.terminal, job, approved()).await;
    assert_eq!((paid.status, paid.body["state"].as_str()), (200, Some("approved")), "{}", paid.body);
    assert_eq!(paid.body["card_last4"], "4242");
    let again = c.report_payment(&app, &c.terminal, job, approved()).await;
    assert_eq!(again.body, paid.body, "the same report is answered the same");
    let declined = json!({"outcome": "declined", "reason": "Insufficient funds"});
    assert_eq!(c.report_payment(&app, &c.terminal, job, declined).await.status, 409);

    let sale = app.get(c.key(), &format!("/purchases/{id}")).await.body;
    assert_eq!((sale["payment_status"].as_str(), sale["receipt_number"].as_i64()), (Some("paid"), Some(1)));
    assert_eq!(app.get(c.key(), "/purchases?payment_status=paid").await.body["meta"]["total"], 1);
    let stats = app.get(c.key(), "/statistics").await.body;
    assert_eq!(stats["revenue_this_month"]["paid"], json!([{"amount": 620, "currency": "EUR"}]));

    let receipts = c.take_receipt(&app).await;
    let receipt = &receipts[0]["receipt"];
    assert_eq!((receipt["number"].as_i64(), receipt["gym_name"].as_str()), (Some(1), Some("Counter")));
    assert_eq!(
        receipt["lines"][0],
        json!({"description": "Protein bar", "quantity": 2, "unit_amount": 250, "line_amount": 500})
    );
    assert_eq!(receipt["total"], json!({"amount": 620, "currency": "EUR"}));
    assert!(c.take_receipt(&app).await.as_array().unwrap().is_empty(), "a receipt is handed out once");
    let print_job = receipts[0]["id"].as_str().unwrap();
    let path = format!("/printers/{}/jobs/{print_job}/report", c.printer);
    let printed = app.device("POST", &path, c.key(), Some(json!({"outcome": "printed"})), &[]).await;
    assert_eq!((printed.status, printed.body["state"].as_str()), (200, Some("printed")));
    let reprint = app.device("POST", &format!("/orders/{id}/reprint"), c.key(), None, &[]).await;
    assert_eq!(reprint.status, 409, "a printed receipt is final");
    let order = app.device("GET", &format!("/orders/{id}"), c.key(), None, &[]).await.body;
    assert_eq!(
        (order["payment_status"].as_str(), order["receipts"][0]["state"].as_str()),
        (Some("paid"), Some("printed"))
    );
}

/// A declined payment fails the sale; the front desk retries it (a new job, pending again), and
/// a failed receipt is printed again by a new job with the same number. A pending or failed order
/// can be cancelled, a paid one cannot.
#[tokio::test]
async fn declines_retries_reprints_and_cancels() {
    let app = TestApp::spawn().await;
    let c = counter(&app, "Retries").await;
    let order = c.order(&app, json!([{"product_id": c.products["water"], "quantity": 3}])).await.body;
    let id = order["id"].as_str().unwrap().to_string();
    let job = c.take_payment(&app, &c.terminal).await[0]["id"].as_str().unwrap().to_string();
    let declined = json!({"outcome": "declined", "reason": "Card expired"});
    assert_eq!(c.report_payment(&app, &c.terminal, &job, json!({"outcome": "declined"})).await.status, 422);
    assert_eq!(c.report_payment(&app, &c.terminal, &job, declined).await.status, 200);
    let sale = app.get(c.key(), &format!("/purchases/{id}")).await.body;
    assert_eq!(sale["payment_status"], "failed");
    let open = app.device("GET", "/orders?open=true", c.key(), None, &[]).await.body;
    assert_eq!(open["meta"]["total"], 1);

    let retried = app.device("POST", &format!("/orders/{id}/retry-payment"), c.key(), None, &[]).await;
    assert_eq!((retried.status, retried.body["payment_status"].as_str()), (200, Some("pending")), "{}", retried.body);
    assert_eq!(retried.body["payments"].as_array().unwrap().len(), 2);
    assert_eq!(app.device("POST", &format!("/orders/{id}/retry-payment"), c.key(), None, &[]).await.status, 409);
    let second = c.take_payment(&app, &c.terminal).await[0]["id"].as_str().unwrap().to_string();
    assert_ne!(second, job);
    assert_eq!(c.report_payment(&app, &c.terminal, &second, approved()).await.status, 200);
    assert_eq!(app.device("POST", &format!("/orders/{id}/cancel"), c.key(), None, &[]).await.status, 409);

    let receipt = c.take_receipt(&app).await[0]["id"].as_str().unwrap().to_string();
    let path = format!("/printers/{}/jobs/{receipt}/report", c.printer);
    let failed = json!({"outcome": "failed", "reason": "Out of paper"});
    assert_eq!(app.device("POST", &path, c.key(), Some(failed), &[]).await.status, 200);
    let reprint = app.device("POST", &format!("/orders/{id}/reprint"), c.key(), None, &[]).await;
    assert_eq!(reprint.status, 200, "{}", reprint.body);
    let again = c.take_receipt(&app).await;
    assert_eq!(again[0]["receipt"]["number"], 1);
    assert_ne!(again[0]["id"].as_str(), Some(receipt.as_str()));

    // A pending order, and a failed one, are cancelled.
    let pending = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await.body;
    let path = format!("/orders/{}/cancel", pending["id"].as_str().unwrap());
    let cancelled = app.device("POST", &path, c.key(), None, &[]).await;
    assert_eq!(
        (cancelled.body["payment_status"].as_str(), cancelled.body["payments"][0]["state"].as_str()),
        (Some("cancelled"), Some("cancelled"))
    );
    assert!(
        c.take_payment(&app, &c.terminal).await.as_array().unwrap().is_empty(),
        "a cancelled order's payment is not offered"
    );
    assert_eq!(app.get(c.key(), "/purchases?payment_status=cancelled").await.body["meta"]["total"], 1);
}

/// Orders name every problem at once: an unknown and an archived product, a currency mix, a
/// foreign member, a kiosk that is not one.
#[tokio::test]
async fn an_order_names_every_problem_by_line() {
    let app = TestApp::spawn().await;
    let c = counter(&app, "Problems").await;
    let lines = json!([
        {"product_id": c.products["bar"], "quantity": 1},
        {"product_id": "0192f7c4-0000-7cc1-a8e3-5b8f4d1e2a90", "quantity": 1},
        {"product_id": c.products["old"], "quantity": 1},
        {"product_id": c.products["usd"], "quantity": 1},
    ]);
    let body = json!({"device_id": c.terminal, "member_id": "0192f7c4-0000-7cc1-a8e3-5b8f4d1e2a91", "lines": lines});
    let r = app.device("POST", "/orders", c.key(), Some(body), &[]).await;
    assert_eq!(r.status, 422, "{}", r.body);
    let errors = &r.body["errors"];
    for field in ["device_id", "member_id", "lines.1.product_id", "lines.2.product_id", "lines.3.product_id"] {
        assert!(errors[field].is_array(), "{field} not named: {errors}");
    }
    assert!(errors["lines.0.product_id"].is_null());
    assert_eq!(app.get(c.key(), "/purchases").await.body["meta"]["total"], 0, "nothing was written");
}

/// A terminal that took a payment and vanished lets it go when its reservation lapses: the next
/// terminal to ask gets it, and the first can no longer report it.
#[tokio::test]
async fn a_lapsed_reservation_is_offered_again() {
    let app = TestApp::spawn_with(|c| c.payment_reservation = Duration::from_secs(1)).await;
    let c = counter(&app, "Lapse").await;
    let other = register(&app, c.key(), "card_terminal", "Second terminal").await;
    c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    let first = c.take_payment(&app, &c.terminal).await;
    let job = first[0]["id"].as_str().unwrap();
    assert!(c.take_payment(&app, &other).await.as_array().unwrap().is_empty(), "held by the first terminal");
    let path = format!("/terminals/{other}/jobs?wait=5");
    let started = std::time::Instant::now();
    let taken = app.device("GET", &path, c.key(), None, &[]).await.body["data"].clone();
    assert_eq!(taken[0]["id"].as_str(), Some(job), "offered again once the reservation lapsed");
    assert!(started.elapsed() < Duration::from_secs(4), "woken when it lapsed, not at the end of the wait");
    assert_eq!(taken[0]["device_id"].as_str(), Some(other.as_str()));
    assert_eq!(c.report_payment(&app, &c.terminal, job, approved()).await.status, 409);
    assert_eq!(c.report_payment(&app, &other, job, approved()).await.status, 200);
}

/// A poll takes one job, however many wait: two terminals asking one after the other get two
/// payments, and a printer gets one receipt per poll, in their order.
#[tokio::test]
async fn a_poll_takes_one_job_and_leaves_the_others() {
    let app = TestApp::spawn().await;
    let c = counter(&app, "One each").await;
    let other = register(&app, c.key(), "card_terminal", "Second terminal").await;
    for _ in 0..3 {
        c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    }
    let first = c.take_payment(&app, &c.terminal).await;
    let second = c.take_payment(&app, &other).await;
    assert_eq!((first.as_array().unwrap().len(), second.as_array().unwrap().len()), (1, 1));
    assert_ne!(first[0]["id"], second[0]["id"]);
    let open = app.device("GET", "/orders?open=true", c.key(), None, &[]).await.body;
    let states: Vec<&str> =
        open["data"].as_array().unwrap().iter().map(|o| o["payments"][0]["state"].as_str().unwrap()).collect();
    assert_eq!(states.iter().filter(|s| **s == "pending").count(), 1, "{states:?}");
    for (terminal, job) in [(&c.terminal, &first[0]["id"]), (&other, &second[0]["id"])] {
        assert_eq!(c.report_payment(&app, terminal, job.as_str().unwrap(), approved()).await.status, 200);
    }
    let receipts = c.take_receipt(&app).await;
    assert_eq!(receipts.as_array().unwrap().len(), 1);
    assert_eq!(c.take_receipt(&app).await.as_array().unwrap().len(), 1);
    assert!(c.take_receipt(&app).await.as_array().unwrap().is_empty());
}

/// Ten terminals, on two servers, ask for one payment at once: exactly one gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_terminals_on_two_servers_take_a_payment_once() {
    let app = TestApp::spawn().await;
    let c = counter(&app, "Race").await;
    let mut terminals = vec![c.terminal.clone()];
    for i in 0..9 {
        terminals.push(register(&app, c.key(), "card_terminal", &format!("T{i}")).await);
    }
    c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    let second = app.another_instance().await;
    let client = crate::common::http_client();
    let asks = terminals.iter().enumerate().map(|(i, t)| {
        let base = if i % 2 == 0 { app.address.clone() } else { second.clone() };
        let req = client.get(format!("{base}/api/v1/devices/terminals/{t}/jobs")).bearer_auth(c.key());
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    });
    let answers = futures_util::future::join_all(asks).await;
    let taken: usize = answers.iter().map(|a| a["data"].as_array().unwrap().len()).sum();
    assert_eq!(taken, 1, "{answers:?}");
}

/// 200 sales paid at once through two servers get receipt numbers 1 to 200, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn receipt_numbers_of_concurrent_sales_are_exactly_one_to_n() {
    let app = TestApp::spawn_with(|c| c.device_rate_limit_per_minute = 100_000).await;
    let c = counter(&app, "Numbers").await;
    let second = app.another_instance().await;
    let client = crate::common::http_client();
    let bases = [app.address.clone(), second];
    let lines = json!([{"product_id": c.products["bar"], "quantity": 1}]);
    for _ in 0..200 {
        assert_eq!(c.order(&app, lines.clone()).await.status, 201);
    }
    // Each terminal takes jobs one by one and approves them; 8 terminals at once on two servers.
    let mut terminals = vec![c.terminal.clone()];
    for i in 0..7 {
        terminals.push(register(&app, c.key(), "card_terminal", &format!("T{i}")).await);
    }
    let work = terminals.iter().enumerate().map(|(i, t)| {
        let (client, base, key) = (client.clone(), bases[i % 2].clone(), c.key().to_string());
        async move {
            loop {
                let url = format!("{base}/api/v1/devices/terminals/{t}/jobs");
                let jobs: Value = client.get(url).bearer_auth(&key).send().await.unwrap().json().await.unwrap();
                let Some(job) = jobs["data"].get(0) else { break };
                let url = format!("{base}/api/v1/devices/terminals/{t}/jobs/{}/report", job["id"].as_str().unwrap());
                let r = client.post(url).bearer_auth(&key).json(&approved()).send().await.unwrap();
                assert_eq!(r.status(), 200);
            }
        }
    });
    futures_util::future::join_all(work).await;
    let mut numbers = Vec::new();
    for page in 1..=2 {
        let list = app.get(c.key(), &format!("/purchases?per_page=100&page={page}")).await.body;
        for p in list["data"].as_array().unwrap() {
            assert_eq!(p["payment_status"], "paid");
            numbers.push(p["receipt_number"].as_i64().unwrap());
        }
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=200).collect::<Vec<i64>>());
    // Each sale's count per month and day moved from pending to paid with it.
    crate::common::assert_day_counts_hold(&app.db, c.gym.id).await;
}

/// `purchase.created` and `purchase.updated` are queued once per endpoint, their payloads the
/// document's `PurchaseEvent`.
#[tokio::test]
async fn each_sale_event_is_queued_once_per_endpoint() {
    use entity::webhook_delivery;
    use gymapi::accounts::Actor;
    use sea_orm::EntityTrait;
    let app = TestApp::spawn().await;
    let c = counter(&app, "Events").await;
    for url in ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"] {
        gymapi::webhooks::create_endpoint(&app.db, &Actor::Operator, c.gym.id, false, url, &[], true).await.unwrap();
    }
    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await.body;
    let job = c.take_payment(&app, &c.terminal).await[0]["id"].as_str().unwrap().to_string();
    c.report_payment(&app, &c.terminal, &job, approved()).await;
    c.report_payment(&app, &c.terminal, &job, approved()).await;
    let deliveries = webhook_delivery::Entity::find().all(&app.db).await.unwrap();
    let mut per_type: HashMap<String, usize> = HashMap::new();
    for d in &deliveries {
        *per_type.entry(d.event_type.clone()).or_default() += 1;
    }
    assert_eq!(per_type.get("purchase.created"), Some(&2), "{per_type:?}");
    assert_eq!(per_type.get("purchase.updated"), Some(&2), "{per_type:?}");
    let events = entity::webhook_event::Entity::find().all(&app.db).await.unwrap();
    for e in events.iter().filter(|e| e.event_type.starts_with("purchase.")) {
        let payload: Value = serde_json::from_str(&e.payload).unwrap();
        crate::common::oracle().check_schema("PurchaseEvent", &payload);
        crate::common::oracle().check_schema("WebhookEvent", &payload);
        assert_eq!(payload["data"]["id"], order["id"]);
    }
}

/// A terminal whose reservation lapsed and whose order the front desk then cancelled charges the
/// card all the same: its report is recorded as a refund due (409 `refund_required`, the same
/// answer again and recorded once), shown in the order, the integration API's purchase and a
/// `purchase.updated` event, and never counted as revenue.
#[tokio::test]
async fn a_charge_after_the_order_was_cancelled_is_recorded_as_a_refund_due() {
    use gymapi::accounts::Actor;
    let app = TestApp::spawn_with(|c| c.payment_reservation = Duration::from_secs(1)).await;
    let c = counter(&app, "Refunds").await;
    gymapi::webhooks::create_endpoint(&app.db, &Actor::Operator, c.gym.id, false, "http://127.0.0.1:9/h", &[], true)
        .await
        .unwrap();
    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 2}])).await.body;
    let id = order["id"].as_str().unwrap();
    let job = c.take_payment(&app, &c.terminal).await[0]["id"].as_str().unwrap().to_string();
    let cancel = format!("/orders/{id}/cancel");
    assert_eq!(app.device("POST", &cancel, c.key(), None, &[]).await.status, 409, "held by the terminal");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(app.device("POST", &cancel, c.key(), None, &[]).await.status, 200, "the reservation lapsed");

    let late = c.report_payment(&app, &c.terminal, &job, approved()).await;
    assert_eq!((late.status, late.error_type()), (409, "refund_required"), "{}", late.body);
    let again = c.report_payment(&app, &c.terminal, &job, approved()).await;
    assert_eq!(again.body, late.body, "the same report is answered the same");

    let order = app.device("GET", &format!("/orders/{id}"), c.key(), None, &[]).await.body;
    let refunds: Vec<&Value> =
        order["payments"].as_array().unwrap().iter().filter(|p| p["state"] == "refund_due").collect();
    assert_eq!(refunds.len(), 1, "recorded once: {order}");
    assert_eq!(
        (refunds[0]["device_id"].as_str(), refunds[0]["amount"].clone(), refunds[0]["card_last4"].as_str()),
        (Some(c.terminal.as_str()), json!({"amount": 500, "currency": "EUR"}), Some("4242"))
    );
    assert_eq!(order["payment_status"], "cancelled");
    let sale = app.get(c.key(), &format!("/purchases/{id}")).await.body;
    assert_eq!(sale["refunds_due"][0]["id"], refunds[0]["id"]);
    assert_eq!(sale["refunds_due"][0]["amount"], json!({"amount": 500, "currency": "EUR"}));
    let stats = app.get(c.key(), "/statistics").await.body;
    assert_eq!(stats["revenue_this_month"]["paid"], json!([]), "a refund due is not revenue");

    use sea_orm::EntityTrait;
    let events = entity::webhook_event::Entity::find().all(&app.db).await.unwrap();
    let told: Vec<Value> = events
        .iter()
        .filter(|e| e.event_type == "purchase.updated")
        .map(|e| serde_json::from_str::<Value>(&e.payload).unwrap())
        .filter(|p| !p["data"]["refunds_due"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(told.len(), 1, "one purchase.updated announces the refund due");
    crate::common::oracle().check_schema("PurchaseEvent", &told[0]);
    crate::common::assert_day_counts_hold(&app.db, c.gym.id).await;
}

/// Only a terminal that took a payment can have charged a card for it: an approval of a job no
/// terminal took, or one that another terminal holds, is 409 and records nothing (each was
/// recorded as a refund due: money to give back that no card paid). A terminal that took the job
/// and reports two cards late has both charges recorded, each once (the second was answered with
/// the first card and recorded nowhere).
#[tokio::test]
async fn only_a_terminal_that_took_a_payment_records_a_charge_on_it() {
    let app = TestApp::spawn_with(|c| c.payment_reservation = Duration::from_secs(1)).await;
    let c = counter(&app, "Forged").await;
    let other = register(&app, c.key(), "card_terminal", "Second terminal").await;
    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await.body;
    let id = order["id"].as_str().unwrap().to_string();
    let refunds = || async {
        let order = app.device("GET", &format!("/orders/{id}"), c.key(), None, &[]).await.body;
        let payments = order["payments"].as_array().unwrap().clone();
        payments.into_iter().filter(|p| p["state"] == "refund_due").collect::<Vec<Value>>()
    };
    let order = app.device("GET", &format!("/orders/{id}"), c.key(), None, &[]).await.body;
    let job = order["payments"][0]["id"].as_str().unwrap().to_string();

    let untaken = c.report_payment(&app, &other, &job, approved()).await;
    assert_eq!(untaken.status, 409, "{}", untaken.body);
    assert_ne!(untaken.error_type(), "refund_required", "{}", untaken.body);
    assert!(untaken.body.to_string().contains("never took"), "{}", untaken.body);
    assert_eq!(c.take_payment(&app, &c.terminal).await[0]["id"], job.as_str());
    let held_elsewhere = c.report_payment(&app, &other, &job, approved()).await;
    assert_eq!((held_elsewhere.status, held_elsewhere.error_type()), (409, untaken.error_type()));
    assert!(refunds().await.is_empty(), "nothing recorded");

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let cancel = format!("/orders/{id}/cancel");
    assert_eq!(app.device("POST", &cancel, c.key(), None, &[]).await.status, 200, "the reservation lapsed");
    let late = c.report_payment(&app, &c.terminal, &job, approved()).await;
    assert_eq!((late.status, late.error_type()), (409, "refund_required"), "{}", late.body);
    let mastercard = json!({"outcome": "approved", "card_scheme": "mastercard", "card_last4": "1111"});
    let second = c.report_payment(&app, &c.terminal, &job, mastercard.clone()).await;
    assert_eq!((second.status, second.error_type()), (409, "refund_required"), "{}", second.body);
    assert_ne!(second.body, late.body, "another charge");
    assert_eq!(c.report_payment(&app, &c.terminal, &job, mastercard).await.body, second.body, "recorded once");
    assert_eq!(c.report_payment(&app, &c.terminal, &job, approved()).await.body, late.body, "recorded once");
    let mut cards: Vec<String> =
        refunds().await.iter().map(|r| r["card_last4"].as_str().unwrap().to_string()).collect();
    cards.sort();
    assert_eq!(cards, ["1111", "4242"]);
    crate::common::assert_day_counts_hold(&app.db, c.gym.id).await;
}

/// A receipt is frozen when its sale is paid: printed again after the gym changed its time zone,
/// it is the same receipt, field for field.
#[tokio::test]
async fn a_reprint_is_the_same_receipt_after_the_gym_moved_its_time_zone() {
    let app = TestApp::spawn().await;
    let c = counter(&app, "Frozen").await;
    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await.body;
    let id = order["id"].as_str().unwrap();
    let job = c.take_payment(&app, &c.terminal).await[0]["id"].as_str().unwrap().to_string();
    assert_eq!(c.report_payment(&app, &c.terminal, &job, approved()).await.status, 200);
    let first = c.take_receipt(&app).await[0].clone();
    let path = format!("/printers/{}/jobs/{}/report", c.printer, first["id"].as_str().unwrap());
    let failed = json!({"outcome": "failed", "reason": "Out of paper"});
    assert_eq!(app.device("POST", &path, c.key(), Some(failed), &[]).await.status, 200);

    let update = gymapi::accounts::GymUpdate { timezone: Some("Asia/Tokyo".into()), ..Default::default() };
    gymapi::accounts::update_gym(&app.db, app.store.as_ref(), c.gym.id, update).await.unwrap();
    let reprint = app.device("POST", &format!("/orders/{id}/reprint"), c.key(), None, &[]).await;
    assert_eq!(reprint.status, 200, "{}", reprint.body);
    let second = c.take_receipt(&app).await[0].clone();
    assert_ne!(second["id"], first["id"]);
    assert_eq!(second["receipt"], first["receipt"], "the same receipt");
    assert_eq!(first["receipt"]["timezone"], "UTC");
    let order = app.device("GET", &format!("/orders/{id}"), c.key(), None, &[]).await.body;
    for r in order["receipts"].as_array().unwrap() {
        assert_eq!(r["receipt"], first["receipt"], "the order shows the receipt as printed");
    }
}

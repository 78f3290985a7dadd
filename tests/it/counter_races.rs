//! Money at the counter under races: a cancel and a terminal's take, a terminal's late approval
//! and another terminal's take, each sent at the same moment many times, on one server and on two
//! sharing the database (and Redis); the outcome is then read from the database: every card charge
//! a terminal was answered for is recorded once (the sale's payment, or a refund due), no payment
//! is held by two terminals, and the statistics count each paid sale's money once.
//! `TEST_RACE_TRIES` sets the tries per layout (50 by default).

use std::time::Duration;

use entity::{payment_job, purchase, states::PaymentJobState};
use reqwest::Method;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

use crate::{
    common::{TestApp, devices_oracle},
    counter::{Counter, approved, counter, register},
};

/// A spread of the second request's start over a few milliseconds, so that the tries meet at
/// every point of the first request's transaction.
async fn jitter(i: usize) {
    tokio::time::sleep(Duration::from_micros(u64::try_from(i % 12).unwrap() * 400)).await;
}

fn tries() -> usize {
    std::env::var("TEST_RACE_TRIES").ok().and_then(|n| n.parse().ok()).unwrap_or(50)
}

/// The device API of a gym on one or two servers: request `i` goes to server `i % servers`, and
/// every answer is checked against openapi-devices.yaml.
struct Desk {
    client: reqwest::Client,
    bases: Vec<String>,
    key: String,
}

impl Desk {
    async fn on(app: &TestApp, key: &str, servers: usize) -> Self {
        let mut bases = vec![app.address.clone()];
        if servers > 1 {
            bases.push(app.another_instance().await);
        }
        Self { client: crate::common::http_client(), bases, key: key.to_string() }
    }

    async fn call(&self, server: usize, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let base = &self.bases[server % self.bases.len()];
        let mut req =
            self.client.request(method.clone(), format!("{base}/api/v1/devices{path}")).bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
        let body: Value = resp.json().await.unwrap();
        devices_oracle().check(method.as_str(), path.split('?').next().unwrap(), status, &headers, &body);
        (status, body)
    }

    /// A terminal's poll that does not wait: the job it took, if any.
    async fn take(&self, server: usize, terminal: &str) -> Option<String> {
        let (status, body) = self.call(server, Method::GET, &format!("/terminals/{terminal}/jobs?wait=0"), None).await;
        assert_eq!(status, 200, "{body}");
        body["data"].get(0).map(|j| j["id"].as_str().unwrap().to_string())
    }

    /// A terminal's approval of `job` (it charged the card): whether the charge is the sale's
    /// payment (200) or recorded as a refund due (409 `refund_required`); anything else is a charge
    /// with nowhere to go.
    async fn charge(&self, server: usize, terminal: &str, job: &str) -> Charge {
        let path = format!("/terminals/{terminal}/jobs/{job}/report");
        let (status, body) = self.call(server, Method::POST, &path, Some(approved())).await;
        match (status, body["error"]["type"].as_str()) {
            (200, _) => Charge::Paid,
            (409, Some("refund_required")) => Charge::RefundDue,
            _ => Charge::Lost(format!("{status} {body}")),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Charge {
    Paid,
    RefundDue,
    /// Answered otherwise: the charge is not recorded.
    Lost(String),
}

/// Reads the outcome from the database and the API: `charges` card charges were answered, so the
/// gym's payment jobs hold that many approved and `refund_due` ones together; each paid sale has
/// exactly one approved payment; the purchases show the refunds due; the statistics' revenue is
/// the paid sales' money, once.
async fn audit(app: &TestApp, c: &Counter, charges: usize) {
    let jobs = payment_job::Entity::find().filter(payment_job::Column::GymId.eq(c.gym.id)).all(&app.db).await.unwrap();
    let approved: Vec<_> = jobs.iter().filter(|j| j.state == PaymentJobState::Approved).collect();
    let refunds = jobs.iter().filter(|j| j.state == PaymentJobState::RefundDue).count();
    assert_eq!(approved.len() + refunds, charges, "card charges recorded (approved + refund due) against charges made");
    let paid = purchase::Entity::find()
        .filter(purchase::Column::GymId.eq(c.gym.id))
        .filter(purchase::Column::PaymentStatus.eq(entity::states::PaymentStatus::Paid))
        .all(&app.db)
        .await
        .unwrap();
    for p in &paid {
        assert_eq!(approved.iter().filter(|j| j.purchase_id == p.id).count(), 1, "sale {} paid once", p.id);
    }
    assert_eq!(paid.len(), approved.len(), "every approved payment paid its sale");
    let mut shown = 0;
    let mut page = 1;
    loop {
        let list = app.get(c.key(), &format!("/purchases?per_page=100&page={page}")).await.body;
        for p in list["data"].as_array().unwrap() {
            shown += p["refunds_due"].as_array().unwrap().len();
        }
        if list["links"]["next"].is_null() {
            break;
        }
        page += 1;
    }
    assert_eq!(shown, refunds, "the purchases show every refund due");
    let stats = app.get(c.key(), "/statistics").await.body;
    let revenue: i64 =
        stats["revenue_this_month"]["paid"].as_array().unwrap().iter().map(|m| m["amount"].as_i64().unwrap()).sum();
    assert_eq!(revenue, 250 * i64::try_from(paid.len()).unwrap(), "revenue counts each paid sale once: {stats}");
}

async fn order_one(app: &TestApp, c: &Counter) -> String {
    let r = c.order(app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_str().unwrap().to_string()
}

/// A cancel and a terminal's take of the order's payment, sent at the same moment: one of them
/// wins, never both. Whatever the terminal took it charges, and that charge pays the sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_and_a_take_at_the_same_moment_never_both_win() {
    let app = TestApp::spawn_with(|c| c.device_rate_limit_per_minute = 1_000_000).await;
    let c = counter(&app, "Cancel race").await;
    let (mut charges, mut failures) = (0, Vec::new());
    for servers in [1, 2] {
        let desk = Desk::on(&app, c.key(), servers).await;
        let (mut cancelled, mut taken) = (0, 0);
        for i in 0..tries() {
            let order = order_one(&app, &c).await;
            let path = format!("/orders/{order}/cancel");
            let cancel = desk.call(i, Method::POST, &path, None);
            let take = async {
                jitter(i).await;
                desk.take(i + 1, &c.terminal).await
            };
            let ((status, _), took) = tokio::join!(cancel, take);
            if let Some(job) = &took {
                // The terminal charges the card it was handed.
                match desk.charge(i, &c.terminal, job).await {
                    Charge::Paid => {}
                    other => failures.push(format!("{servers} server(s), try {i}: a taken payment charged: {other:?}")),
                }
                charges += 1;
            }
            match (status, took.is_some()) {
                (200, false) => cancelled += 1,
                (409, true) => taken += 1,
                (status, took) => failures.push(format!("{servers} server(s), try {i}: cancel {status}, taken {took}")),
            }
        }
        eprintln!("{servers} server(s): {cancelled} cancelled, {taken} taken and paid");
    }
    assert!(failures.is_empty(), "{} failed tries of {}: {failures:#?}", failures.len(), 2 * tries());
    audit(&app, &c, charges).await;
}

/// A terminal whose reservation just lapsed approves its payment at the moment another terminal
/// polls: the payment is held by one of them, and a charge by the other is recorded as a refund
/// due, never dropped and never a second payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_approval_and_another_terminals_take_never_both_hold_the_payment() {
    let reservation = Duration::from_millis(100);
    let app = TestApp::spawn_with(|c| {
        c.device_rate_limit_per_minute = 1_000_000;
        c.payment_reservation = reservation;
    })
    .await;
    let c = counter(&app, "Lapse race").await;
    let other = register(&app, c.key(), "card_terminal", "Second terminal").await;
    let (mut charges, mut failures) = (0, Vec::new());
    for servers in [1, 2] {
        let desk = Desk::on(&app, c.key(), servers).await;
        let (mut first, mut second) = (0, 0);
        for i in 0..tries() {
            order_one(&app, &c).await;
            let job = desk.take(i, &c.terminal).await.expect("the first terminal takes the payment");
            tokio::time::sleep(reservation + Duration::from_millis(2)).await;
            let took = async {
                jitter(i).await;
                desk.take(i + 1, &other).await
            };
            let (late, took) = tokio::join!(desk.charge(i, &c.terminal, &job), took);
            charges += 1;
            let charge = match &took {
                Some(taken) => {
                    assert_eq!(taken, &job, "try {i}: the only payment waiting");
                    charges += 1;
                    Some(desk.charge(i + 1, &other, taken).await)
                }
                None => None,
            };
            match (late, charge) {
                (Charge::Paid, None | Some(Charge::RefundDue)) => first += 1,
                (Charge::RefundDue, Some(Charge::Paid)) => second += 1,
                (late, other) => failures.push(format!("{servers} server(s), try {i}: late {late:?}, other {other:?}")),
            }
        }
        eprintln!("{servers} server(s): the late approval paid {first} times, the other terminal {second} times");
    }
    assert!(failures.is_empty(), "{} failed tries of {}: {failures:#?}", failures.len(), 2 * tries());
    audit(&app, &c, charges).await;
}

//! The read-only resources and the statistics, on data written straight to the database.

use chrono::{Duration, TimeZone, Utc};
use entity::states::{AttendanceKind, AttendanceStatus, BillingInterval, PaymentStatus, PlanStatus, ProductStatus};
use entity::{attendance, member_membership, membership_plan, product, purchase, subscription_plan};
use gymapi::{accounts, records::new_id};
use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::{Gym, TestApp};

struct Seeded {
    plan: Uuid,
    sub: Uuid,
    product: Uuid,
    member: Uuid,
}

async fn seed(app: &TestApp, gym: &Gym, currency: &str) -> Seeded {
    let db = &app.db;
    let now = gymapi::records::now();
    let facility = accounts::first_facility(db, gym.id).await.unwrap().unwrap().id;
    let member: Uuid = app.member(&gym.live_key, "Seed", "Member").await["id"].as_str().unwrap().parse().unwrap();
    let plan = membership_plan::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym.id),
        name: Set("10 visits".into()),
        description: Set(None),
        price_amount: Set(9900),
        currency: Set(currency.into()),
        duration_days: Set(Some(90)),
        visit_limit: Set(Some(10)),
        status: Set(PlanStatus::Active),
        legacy_id: Set(Some("P1".into())),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .unwrap()
    .id;
    let sub = subscription_plan::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym.id),
        name: Set("Monthly".into()),
        description: Set(Some("d".into())),
        price_amount: Set(4900),
        currency: Set(currency.into()),
        billing_interval: Set(BillingInterval::Month),
        billing_interval_count: Set(1),
        status: Set(PlanStatus::Active),
        legacy_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .unwrap()
    .id;
    let product = product::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym.id),
        name: Set("Bar".into()),
        description: Set(None),
        sku: Set(Some("B-1".into())),
        price_amount: Set(250),
        currency: Set(currency.into()),
        status: Set(ProductStatus::Active),
        legacy_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .unwrap()
    .id;
    product::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym.id),
        name: Set("Old shirt".into()),
        description: Set(None),
        sku: Set(None),
        price_amount: Set(1000),
        currency: Set(currency.into()),
        status: Set(ProductStatus::Inactive),
        legacy_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .unwrap();
    let today = now.date_naive();
    for (starts, ends) in [
        (today - Duration::days(10), Some(today + Duration::days(10))),
        (today - Duration::days(10), None),
        (today - Duration::days(30), Some(today - Duration::days(1))),
    ] {
        member_membership::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym.id),
            member_id: Set(member.into()),
            membership_plan_id: Set(Some(plan)),
            subscription_plan_id: Set(None),
            starts_on: Set(starts),
            ends_on: Set(ends),
            legacy_id: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(db)
        .await
        .unwrap();
    }
    for (i, (status, amount)) in
        [("paid", 500), ("paid", 700), ("pending", 10_000), ("refunded", 20_000)].into_iter().enumerate()
    {
        purchase::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym.id),
            member_id: Set(if i == 0 { None } else { Some(member.into()) }),
            product_id: Set(Some(product)),
            description: Set("Bar".into()),
            quantity: Set(1),
            total_amount: Set(amount),
            currency: Set(currency.into()),
            payment_status: Set(PaymentStatus::parse(status).unwrap()),
            purchased_at: Set(now - Duration::seconds(i as i64)),
            legacy_id: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            device_id: Set(None),
            facility_id: Set(None),
            receipt_number: Set(None),
        }
        .insert(db)
        .await
        .unwrap();
    }
    // Two check-ins on 2026-03-01 (UTC), one denied door event the day after.
    for (i, (kind, status, at)) in [
        ("check_in", "granted", Utc.with_ymd_and_hms(2026, 3, 1, 8, 0, 0).unwrap()),
        ("check_in", "granted", Utc.with_ymd_and_hms(2026, 3, 1, 23, 59, 59).unwrap()),
        ("access", "denied", Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).unwrap()),
    ]
    .into_iter()
    .enumerate()
    {
        attendance::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym.id),
            facility_id: Set(facility),
            member_id: Set(if i == 2 { None } else { Some(member.into()) }),
            kind: Set(AttendanceKind::parse(kind).unwrap()),
            status: Set(AttendanceStatus::parse(status).unwrap()),
            occurred_at: Set(at),
            device_id: Set(None),
            legacy_id: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(db)
        .await
        .unwrap();
    }
    // A bulk load outside the API: the gym's counters are rebuilt after it, as every such writer must.
    gymapi::counters::recount(db, gym.id).await.unwrap();
    Seeded { plan, sub, product, member }
}

fn ids(body: &Value) -> Vec<String> {
    body["data"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn catalogues_list_and_fetch_only_the_gyms_records() {
    let app = TestApp::spawn().await;
    let a = app.gym("A").await;
    let b = app.gym("B").await;
    let sa = seed(&app, &a, "EUR").await;
    let sb = seed(&app, &b, "USD").await;
    for (path, id_a, id_b, object) in [
        ("/memberships", sa.plan, sb.plan, "membership_plan"),
        ("/membership-subscriptions", sa.sub, sb.sub, "subscription_plan"),
        ("/products", sa.product, sb.product, "product"),
    ] {
        let list = app.get(&a.live_key, path).await;
        assert_eq!(list.status, 200, "{path}");
        assert!(ids(&list.body).contains(&id_a.to_string()), "{path}");
        assert!(!ids(&list.body).contains(&id_b.to_string()), "{path} leaks another gym");
        let one = app.get(&a.live_key, &format!("{path}/{id_a}")).await;
        assert_eq!((one.status, one.body["object"].clone()), (200, json!(object)));
        let other = app.get(&a.live_key, &format!("{path}/{id_b}")).await;
        assert_eq!((other.status, other.error_type()), (404, "not_found"), "{path}");
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            let r = app.request(method, path, Some(&a.live_key), Some(json!({})), &[]).await;
            assert_eq!(r.status, 405, "{method} {path}");
        }
    }
    let plan = app.get(&a.live_key, &format!("/memberships/{}", sa.plan)).await.body;
    assert_eq!(plan["price"], json!({"amount": 9900, "currency": "EUR"}));
    assert_eq!(plan["legacy_id"], "P1");
    assert_eq!(ids(&app.get(&a.live_key, "/products?status=inactive").await.body).len(), 1);
    assert_eq!(ids(&app.get(&a.live_key, "/products?status=active").await.body), vec![sa.product.to_string()]);
}

#[tokio::test]
async fn purchases_filter_by_member_and_payment_status() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Sales").await;
    let s = seed(&app, &gym, "EUR").await;
    let all = app.get(&gym.live_key, "/purchases").await.body;
    assert_eq!(all["meta"]["total"], 4);
    let times: Vec<&str> =
        all["data"].as_array().unwrap().iter().map(|p| p["purchased_at"].as_str().unwrap()).collect();
    let mut sorted = times.clone();
    sorted.sort_by(|x, y| y.cmp(x));
    assert_eq!(times, sorted, "newest first by purchased_at");
    assert_eq!(app.get(&gym.live_key, &format!("/purchases?member_id={}", s.member)).await.body["meta"]["total"], 3);
    assert_eq!(app.get(&gym.live_key, "/purchases?payment_status=paid").await.body["meta"]["total"], 2);
    let walk_in = all["data"].as_array().unwrap().iter().find(|p| p["member_id"].is_null()).unwrap();
    let one = app.get(&gym.live_key, &format!("/purchases/{}", walk_in["id"].as_str().unwrap())).await;
    assert_eq!(one.body["total"], json!({"amount": 500, "currency": "EUR"}));
}

#[tokio::test]
async fn attendance_filters_by_member_status_and_days_in_the_gyms_zone() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Visits").await;
    let s = seed(&app, &gym, "EUR").await;
    for path in ["/attendance", "/access-logs"] {
        assert_eq!(app.get(&gym.live_key, path).await.body["meta"]["total"], 3, "{path}");
        assert_eq!(app.get(&gym.live_key, &format!("{path}?member_id={}", s.member)).await.body["meta"]["total"], 2);
        assert_eq!(app.get(&gym.live_key, &format!("{path}?status=denied")).await.body["meta"]["total"], 1);
        // A date is the whole day: both check-ins of March 1st (UTC gym), not the event at midnight after.
        assert_eq!(
            app.get(&gym.live_key, &format!("{path}?from=2026-03-01&to=2026-03-01")).await.body["meta"]["total"],
            2
        );
        assert_eq!(app.get(&gym.live_key, &format!("{path}?from=2026-03-02")).await.body["meta"]["total"], 1);
        let t = app.get(&gym.live_key, &format!("{path}?from=2026-03-01T12:00:00Z&to=2026-03-02T00:00:00Z")).await.body;
        assert_eq!(t["meta"]["total"], 2);
    }
    // In Berlin (UTC+1 in March) the day of March 1st ends at 23:00 UTC.
    accounts::update_gym(
        &app.db,
        &*app.store,
        gym.id,
        accounts::GymUpdate { timezone: Some("Europe/Berlin".into()), ..Default::default() },
    )
    .await
    .unwrap();
    assert_eq!(app.get(&gym.live_key, "/attendance?from=2026-03-01&to=2026-03-01").await.body["meta"]["total"], 1);
    assert_eq!(app.get(&gym.live_key, "/attendance?from=2026-03-02&to=2026-03-02").await.body["meta"]["total"], 2);
}

#[tokio::test]
async fn statistics_count_members_memberships_facilities_and_paid_revenue() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Stats").await;
    let other = app.gym("Noise").await;
    seed(&app, &gym, "EUR").await;
    seed(&app, &other, "EUR").await;
    app.post(&gym.live_key, "/members", json!({"first_name": "In", "last_name": "Active", "status": "inactive"})).await;
    let s = app.get(&gym.live_key, "/statistics").await.body;
    assert_eq!(s["object"], "statistics");
    assert_eq!(s["members"], json!({"total": 2, "active": 1, "inactive": 1}));
    assert_eq!(s["active_memberships"], 2, "the one that ended yesterday does not count");
    assert_eq!(s["facilities"], 1);
    assert_eq!(s["revenue_this_month"]["paid"], json!([{"amount": 1200, "currency": "EUR"}]));
    assert_eq!(s["revenue_this_month"]["timezone"], "UTC");
    let today = Utc::now().date_naive();
    assert_eq!(s["revenue_this_month"]["starts_on"], today.format("%Y-%m-01").to_string());
}

/// The statistics are kept per version of what they count: every write through the API that
/// changes a figure shows in the next answer, on this server and on another one of the same
/// database, each of which kept the answer before it.
#[tokio::test]
async fn statistics_follow_every_write_that_changes_them() {
    let app = TestApp::spawn().await;
    let other = app.another_instance().await;
    let gym = app.gym("Kept").await;
    let k = &gym.live_key;
    let figures = || {
        let (app, other) = (&app, &other);
        async move {
            let mut seen = Vec::new();
            for base in [&app.address, other, &app.address, other] {
                let r = app.client.get(format!("{base}/api/v1/statistics")).bearer_auth(k).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let s: Value = r.json().await.unwrap();
                seen.push(json!([s["members"], s["active_memberships"], s["revenue_this_month"]["paid"]]));
            }
            assert!(seen.windows(2).all(|w| w[0] == w[1]), "both servers, asked twice, agree: {seen:?}");
            seen.swap_remove(0)
        }
    };
    let members = |total: i64, active: i64| json!({"total": total, "active": active, "inactive": total - active});
    assert_eq!(figures().await, json!([members(0, 0), 0, []]));

    let created = app.member(k, "Ada", "Lovelace").await;
    assert_eq!(figures().await, json!([members(1, 1), 0, []]));
    let id = created["id"].as_str().unwrap();
    let r = app.request("PATCH", &format!("/members/{id}"), Some(k), Some(json!({"status": "inactive"})), &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(figures().await, json!([members(1, 0), 0, []]));

    let import = |entity: &'static str, rows: Value| {
        let app = &app;
        async move {
            let r = app.post(k, &format!("/import/{entity}"), json!({ "rows": rows })).await;
            assert_eq!(r.status, 200, "{entity}: {}", r.body);
        }
    };
    import("members", json!([{"legacy_id": "M-1", "first_name": "Grace", "last_name": "Hopper"}])).await;
    assert_eq!(figures().await, json!([members(2, 1), 0, []]));
    let plan =
        json!({"legacy_id": "P-1", "kind": "membership", "name": "Visits", "price": {"amount": 1, "currency": "EUR"}});
    import("plans", json!([plan])).await;
    let today = Utc::now().date_naive();
    import(
        "memberships",
        json!([{"legacy_id": "MS-1", "member_legacy_id": "M-1", "plan_legacy_id": "P-1", "starts_on": today}]),
    )
    .await;
    assert_eq!(figures().await, json!([members(2, 1), 1, []]));
    let sale = |id: &str, amount: i64, status: &str| {
        json!({"legacy_id": id, "description": "Water", "total": {"amount": amount, "currency": "EUR"},
               "payment_status": status, "purchased_at": Utc::now()})
    };
    import("purchases", json!([sale("S-1", 250, "paid"), sale("S-2", 900, "pending")])).await;
    assert_eq!(figures().await, json!([members(2, 1), 1, [{"amount": 250, "currency": "EUR"}]]));
    import("purchases", json!([sale("S-3", 100, "paid")])).await;
    assert_eq!(figures().await, json!([members(2, 1), 1, [{"amount": 350, "currency": "EUR"}]]));
}

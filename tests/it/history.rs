//! A gym's history costs nothing per page: every way of walking a list finds the same pages, a
//! cursor that is not the page's own changes nothing, and a page's statements read its own rows,
//! as the database plans and runs them, at any size of history.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::{Value, json};

use crate::common::{Gym, TestApp};

const MEMBERS: usize = 12;

async fn members(app: &TestApp, gym: &Gym) {
    let rows: Vec<Value> = (0..MEMBERS)
        .map(|i| json!({"legacy_id": format!("M{i}"), "first_name": "H", "last_name": format!("M{i}")}))
        .collect();
    let r = app.post(&gym.live_key, "/import/members", json!({ "rows": rows })).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// Check-ins `from..to`, 30 s apart going back from `base`, two at each moment (the id breaks the
/// tie), one in five denied, each of one member in turn.
async fn grow(app: &TestApp, gym: &Gym, base: DateTime<Utc>, range: std::ops::Range<usize>) {
    grow_every(app, gym, base, range, 30).await;
}

/// [`grow`], `seconds` apart.
async fn grow_every(app: &TestApp, gym: &Gym, base: DateTime<Utc>, range: std::ops::Range<usize>, seconds: i64) {
    let rows: Vec<Value> = range
        .map(|n| {
            let at = base - chrono::Duration::seconds(seconds * (n / 2) as i64);
            json!({"legacy_id": format!("A{n}"), "member_legacy_id": format!("M{}", n % MEMBERS),
                   "occurred_at": at.to_rfc3339(), "status": if n % 5 == 0 { "denied" } else { "granted" }})
        })
        .collect();
    for batch in rows.chunks(500) {
        let r = app.post(&gym.live_key, "/import/attendance", json!({ "rows": batch })).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
}

fn relative(link: &str) -> String {
    link.strip_prefix("/api/v1").unwrap_or_else(|| panic!("not relative: {link}")).to_string()
}

fn encoded(t: &str) -> String {
    url::form_urlencoded::byte_serialize(t.as_bytes()).collect()
}

/// The filters every walk is tried with.
fn filters(member: &str, base: DateTime<Utc>) -> Vec<String> {
    let hour = |h: i64| encoded(&(base - chrono::Duration::hours(h)).to_rfc3339());
    vec![
        String::new(),
        "&status=denied".into(),
        format!("&member_id={member}"),
        format!("&from={}&to={}", hour(3), hour(1)),
    ]
}

/// Following `links.next`, asking `page=meta.next_page` with `as_of`, asking every page cold by
/// its number (last first, so that no page was kept for it), and following `links.prev` back from
/// the last page all list the same records in the same order, once each.
#[tokio::test]
async fn every_way_of_walking_a_list_finds_the_same_pages() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Walks").await;
    members(&app, &gym).await;
    let base = Utc::now() - chrono::Duration::minutes(5);
    grow(&app, &gym, base, 0..1_100).await;
    let member =
        app.get(&gym.live_key, "/members?per_page=1").await.body["data"][0]["id"].as_str().unwrap().to_string();
    for filter in filters(&member, base) {
        let first = app.get(&gym.live_key, &format!("/attendance?per_page=40{filter}")).await.body;
        let (total, last) = (first["meta"]["total"].as_u64().unwrap(), first["meta"]["last_page"].as_i64().unwrap());
        assert!(total > 40, "{filter}: {total} rows make more than one page");
        let as_of = encoded(first["meta"]["as_of"].as_str().unwrap());

        let mut by_link = ids(&first);
        let mut page = first.clone();
        while let Some(next) = page["links"]["next"].as_str() {
            assert!(next.contains("cursor="), "{next}");
            page = app.get(&gym.live_key, &relative(next)).await.body;
            assert_eq!(page["meta"]["total"], total, "{filter}");
            by_link.extend(ids(&page));
        }
        assert_eq!(by_link.len() as u64, total, "{filter}: every record once");

        let number = |p: i64| format!("/attendance?per_page=40{filter}&page={p}&as_of={as_of}");
        let mut by_number = ids(&first);
        for p in 2..=last {
            by_number.extend(ids(&app.get(&gym.live_key, &number(p)).await.body));
        }
        assert_eq!(by_number, by_link, "{filter}: page=meta.next_page with as_of");

        // Cold: a walk pinned a microsecond later holds the same records and has nothing kept.
        let later = encoded(
            &(first["meta"]["as_of"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap()
                + chrono::Duration::microseconds(1))
            .to_rfc3339(),
        );
        let mut cold = Vec::new();
        for p in (1..=last).rev() {
            let body =
                app.get(&gym.live_key, &format!("/attendance?per_page=40{filter}&page={p}&as_of={later}")).await.body;
            cold.splice(0..0, ids(&body));
        }
        assert_eq!(cold, by_link, "{filter}: each page by its number alone");

        let mut back = Vec::new();
        let mut page = app.get(&gym.live_key, &number(last)).await.body;
        loop {
            back.splice(0..0, ids(&page));
            let Some(prev) = page["links"]["prev"].as_str() else { break };
            page = app.get(&gym.live_key, &relative(prev)).await.body;
        }
        assert_eq!(back, by_link, "{filter}: links.prev from the last page");
    }
}

/// One member's total is the member's own count of entries, check-ins and door events of every
/// status, pinned at the walk's `as_of`: entries written after it are not counted or listed by
/// the walk, and a new walk counts them.
#[tokio::test]
async fn a_members_total_is_their_own_count_at_the_walks_as_of() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Member totals").await;
    members(&app, &gym).await;
    let base = Utc::now() - chrono::Duration::minutes(5);
    grow(&app, &gym, base, 0..240).await;
    let entry = |n: usize, status: &str| {
        let at = base - chrono::Duration::hours(n as i64);
        json!({"legacy_id": format!("D{n}"), "member_legacy_id": "M1", "occurred_at": at.to_rfc3339(), "status": status})
    };
    let doors = json!({"rows": [entry(0, "granted"), entry(1, "denied"), entry(2, "denied")]});
    assert_eq!(app.post(&gym.live_key, "/import/access_logs", doors).await.status, 200);
    let listed = app.get(&gym.live_key, "/members?per_page=100").await.body;
    let m1 = listed["data"].as_array().unwrap().iter().find(|m| m["legacy_id"] == "M1").unwrap()["id"].clone();
    let m1 = m1.as_str().unwrap();
    // M1 has every twelfth of the 240 check-ins, and the three door events.
    let url = format!("/attendance?per_page=7&member_id={m1}");
    let first = app.get(&gym.live_key, &url).await.body;
    assert_eq!(first["meta"]["total"], 23, "{first}");
    let as_of = encoded(first["meta"]["as_of"].as_str().unwrap());
    let more = json!({"rows": [entry(3, "granted"), entry(4, "denied")]});
    assert_eq!(app.post(&gym.live_key, "/import/access_logs", more).await.status, 200);
    let pinned = app.get(&gym.live_key, &format!("{url}&page=4&as_of={as_of}")).await.body;
    assert_eq!((pinned["meta"]["total"].as_i64(), pinned["data"].as_array().map(Vec::len)), (Some(23), Some(2)));
    let access = app.get(&gym.live_key, &format!("/access-logs?per_page=7&member_id={m1}")).await.body;
    assert_eq!(access["meta"]["total"], 25);
    crate::common::assert_day_counts_hold(&app.db, gym.id).await;
}

/// A cursor from another walk, another page, another gym, or an edited one is ignored: the page
/// is the one `page` names. One that cannot be a cursor at all is 422.
#[tokio::test]
async fn a_cursor_that_is_not_the_pages_own_changes_nothing() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Cursors").await;
    let other = app.gym("Other").await;
    members(&app, &gym).await;
    members(&app, &other).await;
    let base = Utc::now() - chrono::Duration::minutes(5);
    grow(&app, &gym, base, 0..300).await;
    grow(&app, &other, base, 0..300).await;
    let first = app.get(&gym.live_key, "/attendance?per_page=10").await.body;
    let next = first["links"]["next"].as_str().unwrap();
    let cursor = next.split("cursor=").nth(1).unwrap().to_string();
    let as_of = encoded(first["meta"]["as_of"].as_str().unwrap());
    let page = |p: i64, extra: &str| format!("/attendance?per_page=10&page={p}&as_of={as_of}{extra}");
    let page3 = ids(&app.get(&gym.live_key, &page(3, "")).await.body);
    let denied3 = ids(&app.get(&gym.live_key, &page(3, "&status=denied")).await.body);
    let mut edited = cursor.clone().into_bytes();
    edited[5] = if edited[5] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    for (url, expected, why) in [
        (page(3, &format!("&cursor={cursor}")), &page3, "a cursor to page 2 on page 3"),
        (page(3, &format!("&status=denied&cursor={cursor}")), &denied3, "a cursor of another filter"),
        (page(3, &format!("&cursor={edited}")), &page3, "an edited cursor"),
        (page(3, "&cursor=AAAA"), &page3, "a made-up cursor"),
    ] {
        let r = app.get(&gym.live_key, &url).await;
        assert_eq!(r.status, 200, "{why}");
        assert_eq!(&ids(&r.body), expected, "{why}");
        assert_eq!(r.body["meta"]["current_page"], 3, "{why}");
    }
    // The same walk's link, on another gym: that gym's own page 2.
    let theirs = app.get(&other.live_key, &format!("/attendance?per_page=10&page=2&as_of={as_of}")).await.body;
    let crossed = app.get(&other.live_key, &relative(next)).await.body;
    assert_eq!(ids(&crossed), ids(&theirs));
    for bad in ["%2F%2F", &"A".repeat(257)] {
        let r = app.get(&gym.live_key, &page(2, &format!("&cursor={bad}"))).await;
        assert_eq!(r.status, 422, "{bad}");
        assert!(r.body["errors"]["cursor"].is_array(), "{}", r.body);
    }
}

/// How much of the table the database reads for one statement: on PostgreSQL the rows each plan
/// node produced and threw away when run (`EXPLAIN ANALYZE`); on SQLite, whose plans do not
/// depend on the values or the table's size, the plan's lines, refused when one scans the gym or
/// sorts it whole.
async fn rows_read(db: &impl ConnectionTrait, stmt: &Statement) -> u64 {
    match db.get_database_backend() {
        DbBackend::Postgres => {
            let sql = format!("EXPLAIN (ANALYZE, FORMAT JSON) {}", stmt.sql);
            let explain = Statement { sql, values: stmt.values.clone(), db_backend: DbBackend::Postgres };
            let row = db.query_one(explain).await.unwrap().unwrap();
            let plan: Value = row.try_get("", "QUERY PLAN").unwrap();
            fn walk(v: &Value) -> u64 {
                match v {
                    Value::Object(o) => {
                        // The rows each scan of a table or an index took (a bitmap's index scan
                        // is counted by its heap scan), kept or thrown away.
                        let kind = o.get("Node Type").and_then(Value::as_str).unwrap_or_default();
                        let scans = kind.ends_with("Scan") && kind != "Bitmap Index Scan";
                        let loops = o.get("Actual Loops").and_then(Value::as_u64).unwrap_or(1);
                        let own = ["Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"]
                            .iter()
                            .filter_map(|k| o.get(*k).and_then(Value::as_u64))
                            .sum::<u64>();
                        let mine = if scans { own * loops } else { 0 };
                        mine + o.values().map(walk).sum::<u64>()
                    }
                    Value::Array(a) => a.iter().map(walk).sum(),
                    _ => 0,
                }
            }
            // `SHOW_PLANS=1 cargo test ... history` prints each plan, to see where rows are read.
            if std::env::var("SHOW_PLANS").is_ok() {
                eprintln!("{}\n{}", stmt.sql, plan);
            }
            walk(&plan)
        }
        _ => {
            let sql = format!("EXPLAIN QUERY PLAN {}", stmt.sql);
            let explain = Statement { sql, values: stmt.values.clone(), db_backend: DbBackend::Sqlite };
            let plan: Vec<String> = db
                .query_all(explain)
                .await
                .unwrap()
                .iter()
                .map(|r| r.try_get::<String>("", "detail").unwrap())
                .collect();
            let whole = plan.iter().any(|l| {
                l.starts_with("SCAN attendance")
                    || l.starts_with("SCAN purchases")
                    || l == "USE TEMP B-TREE FOR ORDER BY"
            });
            assert!(!whole, "a statement reads the whole history:\n{}\n{plan:#?}", stmt.sql);
            plan.len() as u64
        }
    }
}

/// What a request's statements on the check-ins read ([`rows_read`]); the statement of the counts
/// per month and day (a row per month of history and shard, and per day of one month) is left out.
async fn checkin_rows_read(db: &impl ConnectionTrait, statements: &[Statement]) -> u64 {
    table_rows_read(db, statements, "attendance").await
}

/// [`checkin_rows_read`] of the statements on `table`.
async fn table_rows_read(db: &impl ConnectionTrait, statements: &[Statement], table: &str) -> u64 {
    let mut n = 0;
    for s in statements.iter().filter(|s| {
        (s.sql.contains(&format!("FROM \"{table}\"")) || s.sql.contains(&format!("FROM {table}")))
            && !s.sql.contains("gym_day_counts")
    }) {
        n += rows_read(db, s).await;
    }
    n
}

/// Asserts that each request read about as much at the larger size of history as at the smaller.
fn assert_flat(reads: &[BTreeMap<String, u64>], small_size: &str, large_size: &str) {
    for (name, small) in &reads[0] {
        let large = reads[1][name];
        assert!(large <= small * 2 + 20, "{name}: {small} rows read with {small_size}, {large} with {large_size}");
    }
}

/// Each list request's statements on the attendance table read about as much with ten times the
/// history as without it: page 1, the next page from the middle of a walk by `links.next` and by
/// number, one member's page (its total the member's own count),
/// a status and an hour's page. The rows a period selects are counted once, by the walk's first
/// page, and are left out of its figure. (A page asked by its number
/// alone is `a_page_asked_by_its_number_alone_reads_at_most_a_day`'s.)
#[tokio::test]
async fn a_page_reads_its_own_rows_not_the_history() {
    let recorded = gymapi::db::Recorded::default();
    let app = TestApp::spawn_recording(recorded.clone(), |c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("History").await;
    members(&app, &gym).await;
    let base = Utc::now() - chrono::Duration::minutes(5);
    let member =
        app.get(&gym.live_key, "/members?per_page=1").await.body["data"][0]["id"].as_str().unwrap().to_string();
    let mut reads: Vec<BTreeMap<String, u64>> = Vec::new();
    let mut have = 0;
    for size in [600, 6_000] {
        grow(&app, &gym, base, have..size).await;
        have = size;
        if app.db.get_database_backend() == DbBackend::Postgres {
            app.db.execute_unprepared("ANALYZE").await.unwrap();
        }
        let mut read = BTreeMap::new();
        for filter in filters(&member, base) {
            // The walk's middle page, asked by its number (not measured), and the next one.
            let first = app.get(&gym.live_key, &format!("/attendance?per_page=25{filter}")).await.body;
            let as_of = encoded(first["meta"]["as_of"].as_str().unwrap());
            let middle = first["meta"]["last_page"].as_i64().unwrap() / 2;
            let page = |p: i64| format!("/attendance?per_page=25{filter}&page={p}&as_of={as_of}");
            let there = app.get(&gym.live_key, &page(middle)).await.body;
            let next = relative(there["links"]["next"].as_str().unwrap());
            let requests = [
                ("page 1", format!("/attendance?per_page=25{filter}")),
                ("links.next from the middle", next),
                ("the middle's next page by number", page(middle + 1)),
            ];
            for (name, path) in requests {
                recorded.lock().unwrap().clear();
                let r = app.get(&gym.live_key, &path).await;
                assert_eq!(r.status, 200, "{path}");
                let statements: Vec<Statement> = recorded.lock().unwrap().drain(..).collect();
                if name != "page 1" {
                    // The walk's total came with the page before: nothing is counted again.
                    let counting =
                        statements.iter().find(|s| s.sql.contains("gym_counters") || s.sql.contains("COUNT("));
                    assert!(counting.is_none(), "{name}{filter} counts again: {}", counting.unwrap().sql);
                }
                let n = checkin_rows_read(&app.db, &statements).await;
                assert!(n > 0, "{name}{filter}: no statement on attendance was recorded");
                // A period, which nothing counts as it is written, is counted over the rows it
                // selects, once per walk, on the walk's first page (a member's total is theirs).
                let counted = name == "page 1" && filter.contains("from");
                let own = if counted { r.body["meta"]["total"].as_u64().unwrap() } else { 0 };
                read.insert(format!("{name} {filter}"), n.saturating_sub(own));
            }
        }
        reads.push(read);
    }
    assert_flat(&reads, "600 check-ins", "6,000");
}

/// The middle page of `list` (`/attendance`, `/purchases`) with each of `filters`, asked by its
/// number alone (the page 1 before it not recorded): by filter, what its statements on `table`
/// read, and the page. Each reads the gym's counts per day.
async fn middle_pages(
    app: &TestApp,
    key: &str,
    recorded: &gymapi::db::Recorded,
    (list, table): (&str, &str),
    filters: &[&str],
) -> BTreeMap<String, (u64, Value)> {
    if app.db.get_database_backend() == DbBackend::Postgres {
        app.db.execute_unprepared("ANALYZE").await.unwrap();
    }
    let mut pages = BTreeMap::new();
    for filter in filters {
        let first = app.get(key, &format!("{list}?per_page=25{filter}")).await.body;
        let middle = first["meta"]["last_page"].as_i64().unwrap() / 2;
        recorded.lock().unwrap().clear();
        let r = app.get(key, &format!("{list}?per_page=25{filter}&page={middle}")).await;
        assert_eq!(r.status, 200);
        let statements: Vec<Statement> = recorded.lock().unwrap().drain(..).collect();
        assert!(statements.iter().any(|s| s.sql.contains("gym_day_counts")), "{filter}: the day counts are read");
        let n = table_rows_read(&app.db, &statements, table).await;
        assert!(n > 0, "{filter}: no statement on {table} was recorded");
        pages.insert(filter.to_string(), (n, r.body));
    }
    pages
}

/// A page asked by its number alone, deep in a history of years, starts from the day it falls in
/// (the gym's counts per month and day say which): its statements on the check-ins read about as
/// much with ten times the history.
#[tokio::test]
async fn a_page_asked_by_its_number_alone_reads_at_most_a_day() {
    let recorded = gymapi::db::Recorded::default();
    let app = TestApp::spawn_recording(recorded.clone(), |c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Deep").await;
    members(&app, &gym).await;
    // Two check-ins every two hours (24 a day): 3,000 span four months, 30,000 three and a half years.
    let base = Utc::now() - chrono::Duration::minutes(5);
    let mut reads: Vec<BTreeMap<String, u64>> = Vec::new();
    let mut have = 0;
    for size in [3_000, 30_000] {
        grow_every(&app, &gym, base, have..size, 2 * 3600).await;
        have = size;
        let pages =
            middle_pages(&app, &gym.live_key, &recorded, ("/attendance", "attendance"), &["", "&status=granted"]);
        reads.push(pages.await.into_iter().map(|(filter, (n, _))| (filter, n)).collect());
    }
    assert_flat(&reads, "3,000 check-ins", "30,000");
}

/// Sales `from..to`, `seconds` apart going back from `base`, one in four pending.
async fn sell_every(app: &TestApp, gym: &Gym, base: DateTime<Utc>, range: std::ops::Range<usize>, seconds: i64) {
    let rows: Vec<Value> = range
        .map(|n| {
            let at = base - chrono::Duration::seconds(seconds * n as i64);
            json!({"legacy_id": format!("S{n}"), "description": "Towel", "total": {"amount": 300, "currency": "EUR"},
                   "payment_status": if n % 4 == 0 { "pending" } else { "paid" }, "purchased_at": at.to_rfc3339()})
        })
        .collect();
    for batch in rows.chunks(500) {
        let r = app.post(&gym.live_key, "/import/purchases", json!({ "rows": batch })).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
}

/// The sales' deep page asked by its number alone starts from its day, as the check-ins' does:
/// its statements on the sales read about as much with ten times the history, and it is the page
/// a walk by `links.next` found.
#[tokio::test]
async fn a_page_of_sales_asked_by_its_number_alone_reads_at_most_a_day() {
    let recorded = gymapi::db::Recorded::default();
    let app = TestApp::spawn_recording(recorded.clone(), |c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Deep sales").await;
    // Twelve sales a day: 3,000 span eight months, 30,000 almost seven years.
    let base = Utc::now() - chrono::Duration::minutes(5);
    let mut reads: Vec<BTreeMap<String, u64>> = Vec::new();
    let mut have = 0;
    for size in [3_000, 30_000] {
        sell_every(&app, &gym, base, have..size, 2 * 3600).await;
        have = size;
        let pages =
            middle_pages(&app, &gym.live_key, &recorded, ("/purchases", "purchases"), &["", "&payment_status=paid"]);
        let mut read = BTreeMap::new();
        for (filter, (n, page)) in pages.await {
            // The same page as the walk's: the page before it by number, then its links.next.
            let (as_of, middle) =
                (encoded(page["meta"]["as_of"].as_str().unwrap()), page["meta"]["current_page"].as_i64().unwrap());
            let before = format!("/purchases?per_page=25{filter}&page={}&as_of={as_of}", middle - 1);
            let next = relative(app.get(&gym.live_key, &before).await.body["links"]["next"].as_str().unwrap());
            assert_eq!(ids(&app.get(&gym.live_key, &next).await.body), ids(&page), "{filter}: page {middle}");
            read.insert(filter, n);
        }
        reads.push(read);
    }
    assert_flat(&reads, "3,000 sales", "30,000");
    crate::common::assert_day_counts_hold(&app.db, gym.id).await;
}

/// Every page asked by its number alone, the gym's counts per day saying where it starts, is the
/// page a walk by `links.next` found: across days and months, with a status, and after check-ins
/// dated inside the walk's history were imported since it began (the walk's `as_of` leaves them out).
#[tokio::test]
async fn a_page_found_from_its_day_is_the_walks_page() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Days").await;
    members(&app, &gym).await;
    let base = Utc::now() - chrono::Duration::minutes(5);
    // 16 a day: 5,000 span ten months.
    grow_every(&app, &gym, base, 0..5_000, 3 * 3600).await;
    for (i, filter) in ["", "&status=granted"].into_iter().enumerate() {
        let first = app.get(&gym.live_key, &format!("/attendance?per_page=100{filter}")).await.body;
        let as_of = encoded(first["meta"]["as_of"].as_str().unwrap());
        let mut walk = vec![ids(&first)];
        let mut page = first.clone();
        while let Some(next) = page["links"]["next"].as_str() {
            page = app.get(&gym.live_key, &relative(next)).await.body;
            walk.push(ids(&page));
        }
        // Check-ins written after the walk began, dated between the ones it lists.
        let rows: Vec<Value> = (0..300)
            .map(|n| {
                let at = base - chrono::Duration::minutes(7 + 17 * 60 * n);
                json!({"legacy_id": format!("L{i}-{n}"), "member_legacy_id": "M1", "occurred_at": at.to_rfc3339(),
                       "status": if n % 2 == 0 { "denied" } else { "granted" }})
            })
            .collect();
        let r = app.post(&gym.live_key, "/import/attendance", json!({ "rows": rows })).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        // Not next to each other: nothing is kept for a page by the one before it.
        for p in (11..walk.len() - 10).step_by(3) {
            let body =
                app.get(&gym.live_key, &format!("/attendance?per_page=100{filter}&page={p}&as_of={as_of}")).await.body;
            assert_eq!(ids(&body), walk[p - 1], "{filter}: page {p} by its number");
        }
    }
    crate::common::assert_day_counts_hold(&app.db, gym.id).await;
}

/// `GET url` below `base`, one of the two APIs, as 200.
async fn list(app: &TestApp, base: &str, key: &str, url: String) -> Value {
    let r = if base == "/api/v1" { app.get(key, &url).await } else { app.device("GET", &url, key, None, &[]).await };
    assert_eq!(r.status, 200, "{url}: {:?}", r.body);
    r.body
}

/// Every list of both documents hands its next page a cursor in `links.next`, and that page is
/// the one its number names.
#[tokio::test]
async fn every_list_hands_its_next_page_a_cursor() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Lists").await;
    let k = &gym.live_key;
    let price = json!({"amount": 100, "currency": "EUR"});
    let at = |n: i64| (Utc::now() - chrono::Duration::minutes(n)).to_rfc3339();
    let imports = [
        ("facilities", json!([{"legacy_id": "F1", "name": "North"}, {"legacy_id": "F2", "name": "South"}])),
        (
            "plans",
            json!([
                {"legacy_id": "P1", "kind": "membership", "name": "Open", "price": price, "duration_days": 30},
                {"legacy_id": "P2", "kind": "membership", "name": "Ten", "price": price, "visit_limit": 10},
                {"legacy_id": "S1", "kind": "subscription", "name": "Monthly", "price": price, "billing_interval": "month"},
                {"legacy_id": "S2", "kind": "subscription", "name": "Yearly", "price": price, "billing_interval": "year"},
            ]),
        ),
        (
            "members",
            json!([{"legacy_id": "M1", "first_name": "A", "last_name": "One"},
                           {"legacy_id": "M2", "first_name": "B", "last_name": "Two"}]),
        ),
        (
            "memberships",
            json!([
                {"legacy_id": "H1", "member_legacy_id": "M1", "plan_legacy_id": "P1", "starts_on": "2026-01-01"},
                {"legacy_id": "H2", "member_legacy_id": "M2", "plan_legacy_id": "P1", "starts_on": "2026-01-01"},
            ]),
        ),
        (
            "attendance",
            json!([{"legacy_id": "A1", "member_legacy_id": "M1", "occurred_at": at(3)},
                              {"legacy_id": "A2", "member_legacy_id": "M2", "occurred_at": at(2)}]),
        ),
        (
            "products",
            json!([{"legacy_id": "X1", "name": "Bar", "price": price}, {"legacy_id": "X2", "name": "Water", "price": price}]),
        ),
        (
            "purchases",
            json!([
                {"legacy_id": "S1", "member_legacy_id": "M1", "description": "Day pass", "total": price, "payment_status": "paid", "purchased_at": at(3)},
                {"legacy_id": "S2", "member_legacy_id": "M2", "description": "Day pass", "total": price, "payment_status": "paid", "purchased_at": at(2)},
            ]),
        ),
    ];
    for (entity, rows) in imports {
        let r = app.post(k, &format!("/import/{entity}"), json!({ "rows": rows })).await;
        assert_eq!(r.status, 200, "{entity}: {:?}", r.body);
    }
    for (kind, name) in [("door", "Front"), ("doorbell", "Bell")] {
        let r = app.device("POST", "/devices", k, Some(json!({"kind": kind, "name": name})), &[]).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    let integration = [
        "/members",
        "/member-memberships",
        "/memberships",
        "/membership-subscriptions",
        "/attendance",
        "/access-logs",
        "/products",
        "/purchases",
        "/facilities",
    ];
    let lists = integration.iter().map(|p| ("/api/v1", *p)).chain([("/api/v1/devices", "/devices")]);
    for (base, path) in lists {
        let first = list(&app, base, k, format!("{path}?per_page=1")).await;
        let next = first["links"]["next"].as_str().unwrap_or_else(|| panic!("{path}: one page only"));
        assert!(next.contains("cursor="), "{path}: {next}");
        let by_link = list(&app, base, k, next.strip_prefix(base).unwrap().to_string()).await;
        let later = first["meta"]["as_of"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap()
            + chrono::Duration::microseconds(1);
        let by_number =
            list(&app, base, k, format!("{path}?per_page=1&page=2&as_of={}", encoded(&later.to_rfc3339()))).await;
        assert!(!ids(&by_link).is_empty(), "{path}");
        assert_eq!(ids(&by_link), ids(&by_number), "{path}");
    }
}

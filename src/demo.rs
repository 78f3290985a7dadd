//! The demo gym of `gymapi demo` and `gymapi serve --demo`: created once, with a sandbox and
//! realistic data, and a fresh live and test key on every run (keys are stored only as
//! fingerprints, so earlier demo keys cannot be shown again; they are revoked instead).

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use entity::ids::{GymId, MemberId};
use entity::{
    api_key, attendance, device, gym, member, member_membership, membership_plan, product, purchase,
    states::{
        AttendanceKind, AttendanceStatus, BillingInterval, DeviceKind, MemberStatus, PaymentStatus, PlanStatus,
        ProductStatus, Role,
    },
    subscription_plan, user,
};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::SliceRandom};
use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set};
use serde_json::json;
use uuid::Uuid;

use crate::{
    accounts::{self, Actor},
    context::Environment,
    counters,
    db::Writing,
    facilities, frontdesk,
    members::{self, NewMember},
    records::{new_id, now},
};

pub const DEMO_GYM_NAME: &str = "Demo Gym";
const LIVE_KEY_NAME: &str = "Demo live key";
const TEST_KEY_NAME: &str = "Demo test key";
/// The owner of the demo gym in the settings area.
pub const DEMO_OWNER_EMAIL: &str = "owner@demo-gym.example";
/// The member whose card the banner's curl shows at the door: active, of the main facility, with
/// an annual pass running today.
const DOOR_MEMBER: usize = 3;
/// That member's access card.
pub const DEMO_DOOR_CARD: &str = "DEMO0003";

pub struct DemoKeys {
    pub gym_id: GymId,
    pub sandbox_id: GymId,
    pub live_key: String,
    pub test_key: String,
    /// The demo gym's owner in the settings area, with a fresh password.
    pub owner_email: String,
    pub owner_password: String,
    /// The main facility's door, which the banner's curl asks.
    pub door_id: Uuid,
    /// The main facility's counter: its kiosk, card terminal and fiscal printer, and a product of
    /// the catalogue, which the banner's sale uses.
    pub counter: Counter,
}

/// The devices and the product of the banner's sale.
pub struct Counter {
    pub kiosk_id: Uuid,
    pub terminal_id: Uuid,
    pub printer_id: Uuid,
    pub product_id: Uuid,
}

impl DemoKeys {
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "gym_id": self.gym_id,
            "sandbox_id": self.sandbox_id,
            "live_key": self.live_key,
            "test_key": self.test_key,
            "owner_email": self.owner_email,
            "owner_password": self.owner_password,
            "door_id": self.door_id,
            "door_card": DEMO_DOOR_CARD,
            "kiosk_id": self.counter.kiosk_id,
            "terminal_id": self.counter.terminal_id,
            "printer_id": self.counter.printer_id,
            "product_id": self.counter.product_id,
        })
    }

    pub fn banner(&self, base: &str) -> String {
        let c = &self.counter;
        format!(
            "Demo gym {gym} is ready.\n\n  live key (real data): {live}\n  test key (sandbox):   {test}\n\n  settings area: {base}/settings  (sign in as {email} / {password})\n\nTry:\n  curl -s -H 'Authorization: Bearer {live}' {base}/api/v1/members?per_page=2\n\nAsk the door whether card {card} may enter:\n  curl -s -X POST -H 'Authorization: Bearer {live}' -H 'Content-Type: application/json' -d '{{\"card\": \"{card}\"}}' {base}/api/v1/devices/doors/{door}/access\n\nThe counter: kiosk {kiosk}, card terminal {terminal}, fiscal printer {printer}, a product {product} (README, \"The front desk's devices\").\n",
            gym = self.gym_id,
            live = self.live_key,
            test = self.test_key,
            email = self.owner_email,
            password = self.owner_password,
            card = DEMO_DOOR_CARD,
            door = self.door_id,
            kiosk = c.kiosk_id,
            terminal = c.terminal_id,
            printer = c.printer_id,
            product = c.product_id,
        )
    }
}

/// The demo gym (created with data on first use), its sandbox, and a fresh pair of keys.
pub async fn ensure(db: &DatabaseConnection, store: &dyn crate::limits::Store) -> anyhow::Result<DemoKeys> {
    let existing = gym::Entity::find()
        .filter(gym::Column::Name.eq(DEMO_GYM_NAME))
        .filter(gym::Column::ParentGymId.is_null())
        .one(db)
        .await?;
    let gym = match existing {
        Some(g) => g,
        None => {
            let g = accounts::create_gym(db, DEMO_GYM_NAME, "Europe/Berlin", true).await?;
            seed(db, g.id).await?;
            g
        }
    };
    let sandbox = match accounts::sandbox_of(db, gym.id).await? {
        Some(s) => s,
        None => accounts::provision_sandbox(db, &Actor::Operator, gym.id).await?,
    };
    let old = api_key::Entity::find()
        .filter(api_key::Column::GymId.eq(gym.id))
        .filter(api_key::Column::Name.is_in([LIVE_KEY_NAME, TEST_KEY_NAME]))
        .filter(api_key::Column::RevokedAt.is_null())
        .all(db)
        .await?;
    for k in old {
        accounts::revoke_key(db, store, &Actor::Operator, k.id).await?;
    }
    let live = accounts::create_key(db, &Actor::Operator, gym.id, Environment::Live, LIVE_KEY_NAME).await?;
    let test = accounts::create_key(db, &Actor::Operator, gym.id, Environment::Test, TEST_KEY_NAME).await?;
    // The owner of the settings area: created once, a fresh password on every run (like the keys).
    let owner_password = crate::settings::session::token()[..20].to_string();
    let owner = user::Entity::find().filter(user::Column::Email.eq(DEMO_OWNER_EMAIL)).one(db).await?;
    match owner {
        Some(u) if u.gym_id == gym.id => {
            accounts::set_password(db, u.id, &owner_password).await?;
        }
        Some(_) => anyhow::bail!("{DEMO_OWNER_EMAIL} belongs to another gym"),
        None => {
            accounts::create_user(db, gym.id, DEMO_OWNER_EMAIL, Role::Owner, &[], &owner_password).await?;
        }
    }
    let door = device::Entity::find()
        .filter(device::Column::GymId.eq(gym.id))
        .filter(device::Column::Kind.eq(DeviceKind::Door))
        .order_by_asc(device::Column::CreatedAt)
        .order_by_asc(device::Column::Name)
        .one(db)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the demo gym has no door"))?;
    let counter = counter(db, gym.id, door.facility_id).await?;
    Ok(DemoKeys {
        door_id: door.id,
        counter,
        gym_id: gym.id,
        sandbox_id: sandbox.id,
        live_key: live.key,
        test_key: test.key,
        owner_email: DEMO_OWNER_EMAIL.to_string(),
        owner_password,
    })
}

const FIRST: &[&str] = &[
    "Ada",
    "Grace",
    "Alan",
    "Linus",
    "Margaret",
    "Ken",
    "Barbara",
    "Dennis",
    "Frances",
    "Edsger",
    "Hedy",
    "John",
    "Katherine",
    "Tim",
    "Radia",
    "Niklaus",
    "Sophie",
    "Lea",
    "Jonas",
    "Mia",
];
const LAST: &[&str] = &[
    "Lovelace",
    "Hopper",
    "Turing",
    "Torvalds",
    "Hamilton",
    "Thompson",
    "Liskov",
    "Ritchie",
    "Allen",
    "Dijkstra",
    "Lamarr",
    "Backus",
    "Johnson",
    "Berners-Lee",
    "Perlman",
    "Wirth",
    "Wilson",
    "Schmidt",
    "Müller",
    "Weber",
];
const CITIES: &[&str] = &["Berlin", "Hamburg", "Munich", "Cologne", "Leipzig"];

/// Realistic data for every endpoint: members, plans, memberships, check-ins, products, sales.
async fn seed(db: &DatabaseConnection, gym_id: GymId) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(7);
    let at = now();
    let txn = crate::db::begin_writing(db).await?;
    let main_facility =
        accounts::first_facility(&txn, gym_id).await?.ok_or_else(|| anyhow::anyhow!("demo gym has no facility"))?;
    let riverside = facilities::NewFacility { name: "Riverside studio".into(), ..Default::default() };
    let second = facilities::create(&txn, gym_id, riverside).await?;
    let plans = seed_plans(&txn, gym_id, at).await?;
    let members = seed_members(&txn, gym_id, [main_facility.id, second.id], at, &mut rng).await?;
    seed_memberships(&txn, gym_id, &members, &plans, &mut rng).await?;
    seed_shop(&txn, gym_id, &members, at, &mut rng).await?;
    seed_front_desk(&txn, gym_id, [main_facility.id, second.id], members[DOOR_MEMBER].0, plans[1]).await?;
    counters::recount(&txn, gym_id).await?;
    txn.commit().await?;
    Ok(())
}

/// A time `days` days and a random part of a day before `at`.
fn days_ago(at: DateTime<Utc>, days: i64, rng: &mut StdRng) -> DateTime<Utc> {
    at - Duration::days(days) - Duration::seconds(rng.gen_range(0..86_400))
}

/// The membership and subscription plans; returns the membership plans' ids.
async fn seed_plans(txn: &Writing, gym_id: GymId, at: DateTime<Utc>) -> anyhow::Result<Vec<Uuid>> {
    let t = at - Duration::days(400);
    let plans: Vec<membership_plan::ActiveModel> = [
        ("10-visit card", 9900, Some(90), Some(10)),
        ("Annual pass", 49900, Some(365), None),
        ("Student quarter", 11900, Some(90), None),
        ("Day pass", 1200, Some(1), Some(1)),
    ]
    .into_iter()
    .map(|(name, price, days, visits)| membership_plan::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        name: Set(name.into()),
        description: Set(None),
        price_amount: Set(price),
        currency: Set("EUR".into()),
        duration_days: Set(days),
        visit_limit: Set(visits),
        status: Set(PlanStatus::Active),
        legacy_id: Set(None),
        created_at: Set(t),
        updated_at: Set(t),
    })
    .collect();
    let ids = plans.iter().filter_map(|p| p.id.try_as_ref().copied()).collect();
    membership_plan::Entity::insert_many(plans).exec(txn).await?;
    let subs: Vec<subscription_plan::ActiveModel> = [
        ("Monthly unlimited", 4900, BillingInterval::Month),
        ("Off-peak monthly", 2900, BillingInterval::Month),
        ("Yearly unlimited", 47900, BillingInterval::Year),
    ]
    .into_iter()
    .map(|(name, price, interval)| subscription_plan::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        name: Set(name.into()),
        description: Set(Some(format!("{name}, billed every {interval}."))),
        price_amount: Set(price),
        currency: Set("EUR".into()),
        billing_interval: Set(interval),
        billing_interval_count: Set(1),
        status: Set(PlanStatus::Active),
        legacy_id: Set(None),
        created_at: Set(t),
        updated_at: Set(t),
    })
    .collect();
    subscription_plan::Entity::insert_many(subs).exec(txn).await?;
    Ok(ids)
}

/// 300 members and 2,000 check-ins and door events, the members carrying their visit figures;
/// returns each member's id and the time it joined.
async fn seed_members(
    txn: &Writing,
    gym_id: GymId,
    facilities: [Uuid; 2],
    at: DateTime<Utc>,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<(MemberId, DateTime<Utc>)>> {
    let mut members = Vec::new();
    for i in 0..300 {
        let first = *FIRST.choose(rng).unwrap_or(&"Alex");
        let last = *LAST.choose(rng).unwrap_or(&"Smith");
        let created = days_ago(at, rng.gen_range(1..365), rng);
        let email =
            format!("{}.{}{}@example.com", first.to_lowercase(), last.to_lowercase().replace(['ü', ' '], "u"), i);
        let new = NewMember {
            first_name: first.into(),
            last_name: last.into(),
            email: Some(email),
            phone: Some(format!("+49 30 {:07}", rng.gen_range(0..10_000_000))),
            gender: Some(["female", "male", "diverse"][i % 3].into()),
            date_of_birth: chrono::NaiveDate::from_ymd_opt(
                rng.gen_range(1960..2008),
                rng.gen_range(1..13),
                rng.gen_range(1..29),
            ),
            city: Some((*CITIES.choose(rng).unwrap_or(&"Berlin")).into()),
            country: Some("DE".into()),
            status: if i % 9 == 0 { MemberStatus::Inactive } else { MemberStatus::Active },
            facility_id: facilities[i % 5 / 4],
            // Every third member has a card for the demo's door.
            access_card: (i % 3 == 0).then(|| format!("DEMO{i:04}")),
            legacy_id: None,
        };
        members.push(members::row(gym_id, new, created));
    }
    let joined: Vec<(MemberId, DateTime<Utc>)> =
        members.iter().filter_map(|m| Some((*m.id.try_as_ref()?, *m.created_at.try_as_ref()?))).collect();
    // Check-ins first, so members carry their visit counts.
    let mut visits: HashMap<MemberId, (i64, DateTime<Utc>)> = HashMap::new();
    let mut entries = Vec::new();
    for _ in 0..2000 {
        let (mid, since) = joined[rng.gen_range(0..joined.len())];
        let span = (at - since).num_seconds().max(1);
        let t = since + Duration::seconds(rng.gen_range(0..span));
        let status = if rng.gen_bool(0.95) { AttendanceStatus::Granted } else { AttendanceStatus::Denied };
        let kind = if rng.gen_bool(0.7) { AttendanceKind::CheckIn } else { AttendanceKind::Access };
        if status == AttendanceStatus::Granted && kind == AttendanceKind::CheckIn {
            let v = visits.entry(mid).or_insert((0, t));
            v.0 += 1;
            v.1 = v.1.max(t);
        }
        entries.push(attendance::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym_id),
            facility_id: Set(facilities[rng.gen_range(0..2)]),
            member_id: Set(Some(mid)),
            kind: Set(kind),
            status: Set(status),
            occurred_at: Set(t),
            legacy_id: Set(None),
            created_at: Set(t),
            updated_at: Set(t),
            device_id: Set(None),
        });
    }
    for (m, (id, _)) in members.iter_mut().zip(&joined) {
        if let Some((n, last)) = visits.get(id) {
            m.visits_count = Set(*n);
            m.last_visit_at = Set(Some(*last));
        }
    }
    for chunk in members.chunks(200) {
        member::Entity::insert_many(chunk.to_vec()).exec(txn).await?;
    }
    for chunk in entries.chunks(200) {
        attendance::Entity::insert_many(chunk.to_vec()).exec(txn).await?;
    }
    Ok(joined)
}

/// Memberships of the first 260 members, a quarter of them open-ended.
async fn seed_memberships(
    txn: &Writing,
    gym_id: GymId,
    members: &[(MemberId, DateTime<Utc>)],
    plans: &[Uuid],
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let mut holdings = Vec::new();
    for (i, (mid, joined)) in members.iter().enumerate().take(260) {
        let start = joined.date_naive();
        let ends = if i % 4 == 0 { None } else { Some(start + Duration::days(rng.gen_range(30..400))) };
        holdings.push(member_membership::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym_id),
            member_id: Set(*mid),
            membership_plan_id: Set(Some(plans[i % plans.len()])),
            subscription_plan_id: Set(None),
            starts_on: Set(start),
            ends_on: Set(ends),
            legacy_id: Set(None),
            created_at: Set(*joined),
            updated_at: Set(*joined),
        });
    }
    for chunk in holdings.chunks(200) {
        member_membership::Entity::insert_many(chunk.to_vec()).exec(txn).await?;
    }
    Ok(())
}

/// The counter of the main facility, `facility_id`: its kiosk, card terminal and fiscal printer,
/// registered now if the demo gym was made before it had them, and its first active product.
async fn counter(db: &DatabaseConnection, gym_id: GymId, facility_id: Uuid) -> anyhow::Result<Counter> {
    let mut ids = Vec::new();
    for (kind, name) in [
        (DeviceKind::Kiosk, "Lobby kiosk"),
        (DeviceKind::CardTerminal, "Counter terminal"),
        (DeviceKind::FiscalPrinter, "Receipt printer"),
    ] {
        let found = device::Entity::find()
            .filter(device::Column::GymId.eq(gym_id))
            .filter(device::Column::FacilityId.eq(facility_id))
            .filter(device::Column::Kind.eq(kind))
            .one(db)
            .await?;
        let id = match found {
            Some(d) => d.id,
            None => {
                let txn = crate::db::begin_writing(db).await?;
                let d = frontdesk::devices::register(&txn, gym_id, kind, name, Some(facility_id)).await?;
                txn.commit().await?;
                d.id
            }
        };
        ids.push(id);
    }
    let product = entity::product::Entity::find()
        .filter(entity::product::Column::GymId.eq(gym_id))
        .filter(entity::product::Column::Status.eq(entity::states::ProductStatus::Active))
        .order_by_asc(entity::product::Column::CreatedAt)
        .one(db)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the demo gym has no product"))?;
    Ok(Counter { kiosk_id: ids[0], terminal_id: ids[1], printer_id: ids[2], product_id: product.id })
}

/// The front desk: a door and a doorbell at the main facility, a door at the second; and an
/// annual pass running today for the member whose card the banner shows.
async fn seed_front_desk(
    txn: &Writing,
    gym_id: GymId,
    facilities: [Uuid; 2],
    door_member: MemberId,
    annual_pass: Uuid,
) -> anyhow::Result<()> {
    let devices = [
        (DeviceKind::Door, "Main entrance", facilities[0]),
        (DeviceKind::Doorbell, "Front desk bell", facilities[0]),
        (DeviceKind::Door, "Riverside door", facilities[1]),
    ];
    for (kind, name, facility) in devices {
        frontdesk::devices::register(txn, gym_id, kind, name, Some(facility)).await?;
    }
    let today = now().date_naive();
    member_membership::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        member_id: Set(door_member),
        membership_plan_id: Set(Some(annual_pass)),
        subscription_plan_id: Set(None),
        starts_on: Set(today - Duration::days(30)),
        ends_on: Set(Some(today + Duration::days(335))),
        legacy_id: Set(None),
        created_at: Set(now()),
        updated_at: Set(now()),
    }
    .insert(txn)
    .await?;
    Ok(())
}

const CATALOGUE: [(&str, i64); 12] = [
    ("Protein bar", 250),
    ("Water 0.5 l", 150),
    ("Towel rental", 200),
    ("Shaker", 900),
    ("Gym gloves", 1900),
    ("Locker padlock", 700),
    ("Isotonic drink", 250),
    ("Coffee", 180),
    ("Personal training (1 h)", 6000),
    ("Sauna session", 800),
    ("T-shirt", 2500),
    ("Creatine 300 g", 2490),
];

/// The shop's products (the last one archived) and 600 sales of the last 120 days.
async fn seed_shop(
    txn: &Writing,
    gym_id: GymId,
    members: &[(MemberId, DateTime<Utc>)],
    at: DateTime<Utc>,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let mut products = Vec::new();
    let mut catalogue: Vec<(Uuid, &str, i64)> = Vec::new();
    for (i, (name, price)) in CATALOGUE.iter().enumerate() {
        let t = at - Duration::days(380 - i as i64);
        let id = new_id();
        catalogue.push((id, name, *price));
        products.push(product::ActiveModel {
            id: Set(id),
            gym_id: Set(gym_id),
            name: Set((*name).into()),
            description: Set(None),
            sku: Set(Some(format!("SKU-{:03}", i + 1))),
            price_amount: Set(*price),
            currency: Set("EUR".into()),
            status: Set(if i == 11 { ProductStatus::Inactive } else { ProductStatus::Active }),
            legacy_id: Set(None),
            created_at: Set(t),
            updated_at: Set(t),
        });
    }
    product::Entity::insert_many(products).exec(txn).await?;
    let mut sales = Vec::new();
    for i in 0..600 {
        let (pid, name, price) = catalogue[rng.gen_range(0..catalogue.len())];
        let qty = rng.gen_range(1..4);
        let member = if i % 7 == 0 { None } else { Some(members[rng.gen_range(0..members.len())].0) };
        let t = days_ago(at, rng.gen_range(0..120), rng).min(at);
        let status = match rng.gen_range(0..20) {
            0 => PaymentStatus::Failed,
            1 => PaymentStatus::Refunded,
            2 | 3 => PaymentStatus::Pending,
            _ => PaymentStatus::Paid,
        };
        sales.push(purchase::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym_id),
            member_id: Set(member),
            product_id: Set(Some(pid)),
            description: Set(name.to_string()),
            quantity: Set(qty),
            total_amount: Set(price * i64::from(qty)),
            currency: Set("EUR".into()),
            payment_status: Set(status),
            purchased_at: Set(t),
            legacy_id: Set(None),
            created_at: Set(t),
            updated_at: Set(t),
            device_id: Set(None),
            facility_id: Set(None),
            receipt_number: Set(None),
        });
    }
    for chunk in sales.chunks(200) {
        purchase::Entity::insert_many(chunk.to_vec()).exec(txn).await?;
    }
    Ok(())
}

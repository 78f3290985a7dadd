//! What every write of a member must do, whoever writes it (the API, the importer, the demo):
//!
//! - the row carries its derived fields: `search_text` (what `search` matches) and
//!   `email_normalized` (what keeps an email unique per gym, whatever its case), built here only;
//! - the gym's member counters change in the write's own transaction, and the members' version is
//!   bumped whenever the rows a search or a status filter matches may have changed ([`count`], the
//!   one function that writes them; see `counters`);
//! - a change through the API is announced to webhooks in the same transaction ([`announce`]).

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use entity::ids::{GymId, MemberId};
use entity::{member, states::MemberStatus};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, Statement};
use uuid::Uuid;

use crate::{
    counters::{self, MEMBER_ROWS},
    errors::{ApiError, FieldErrors},
    openapi::{Member, MemberObject},
    types::Date,
    webhooks::{self, EventType},
};

/// What `search` matches: `"first last\nemail"`, lowercased here (Unicode, identical on every
/// backend; SQLite's own `lower()` only knows ASCII). The newline keeps a term from spanning the
/// name and the email.
pub fn search_text(first_name: &str, last_name: &str, email: Option<&str>) -> String {
    format!("{first_name} {last_name}\n{}", email.unwrap_or_default()).to_lowercase()
}

/// The form of an email that is unique per gym.
pub fn normalized_email(email: &str) -> String {
    email.to_lowercase()
}

/// A new member's own fields.
#[derive(Clone, Debug)]
pub struct NewMember {
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub gender: Option<String>,
    pub date_of_birth: Option<NaiveDate>,
    pub city: Option<String>,
    pub country: Option<String>,
    pub status: MemberStatus,
    pub facility_id: Uuid,
    pub access_card: Option<String>,
    pub legacy_id: Option<String>,
}

/// The row of a new member of `gym_id`, created at `at`, with its derived fields.
pub fn row(gym_id: GymId, m: NewMember, at: DateTime<Utc>) -> member::ActiveModel {
    member::ActiveModel {
        id: Set(MemberId::generate()),
        gym_id: Set(gym_id),
        facility_id: Set(m.facility_id),
        search_text: Set(search_text(&m.first_name, &m.last_name, m.email.as_deref())),
        email_normalized: Set(m.email.as_deref().map(normalized_email)),
        first_name: Set(m.first_name),
        last_name: Set(m.last_name),
        email: Set(m.email),
        phone: Set(m.phone),
        gender: Set(m.gender),
        date_of_birth: Set(m.date_of_birth),
        city: Set(m.city),
        country: Set(m.country),
        status: Set(m.status),
        access_card: Set(m.access_card),
        legacy_id: Set(m.legacy_id),
        visits_count: Set(0),
        entries_count: Set(0),
        last_visit_at: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    }
}

/// A change of a member: `None` leaves a field as it is; `Some(None)` clears an optional one.
#[derive(Clone, Debug, Default)]
pub struct Edit {
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<Option<String>>,
    pub phone: Option<Option<String>>,
    pub gender: Option<Option<String>>,
    pub date_of_birth: Option<Option<NaiveDate>>,
    pub city: Option<Option<String>>,
    pub country: Option<Option<String>>,
    pub status: Option<MemberStatus>,
    pub facility_id: Option<Uuid>,
    pub access_card: Option<Option<String>>,
}

/// A member changed by [`edit`], ready to be saved, and what [`count`] needs to know of it.
pub struct Edited {
    pub model: member::ActiveModel,
    pub change: Change,
}

/// `current` with `e` applied at `at`; the derived fields follow the fields they derive from.
pub fn edit(current: member::Model, e: Edit, at: DateTime<Utc>) -> Edited {
    let email_after = match &e.email {
        Some(email) => email.as_deref(),
        None => current.email.as_deref(),
    };
    let text = search_text(
        e.first_name.as_deref().unwrap_or(&current.first_name),
        e.last_name.as_deref().unwrap_or(&current.last_name),
        email_after,
    );
    let text_changed = text != current.search_text;
    let before = current.status;
    let after = e.status.unwrap_or(before);
    let mut m: member::ActiveModel = current.into();
    if text_changed {
        m.search_text = Set(text);
    }
    if let Some(v) = e.first_name {
        m.first_name = Set(v);
    }
    if let Some(v) = e.last_name {
        m.last_name = Set(v);
    }
    if let Some(v) = e.facility_id {
        m.facility_id = Set(v);
    }
    if let Some(v) = e.status {
        m.status = Set(v);
    }
    if let Some(email) = e.email {
        m.email_normalized = Set(email.as_deref().map(normalized_email));
        m.email = Set(email);
    }
    let optional = [
        (&mut m.phone, e.phone),
        (&mut m.gender, e.gender),
        (&mut m.city, e.city),
        (&mut m.country, e.country),
        (&mut m.access_card, e.access_card),
    ];
    for (field, value) in optional {
        if let Some(v) = value {
            *field = Set(v);
        }
    }
    if let Some(v) = e.date_of_birth {
        m.date_of_birth = Set(v);
    }
    m.updated_at = Set(at);
    Edited { model: m, change: Change::Updated { before, after, text_changed } }
}

/// What a write did to a gym's members, as far as their counters and version are concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Members were added, with these statuses.
    Added(Vec<MemberStatus>),
    /// One member changed: its status from `before` to `after`, and whether what `search` matches
    /// of it changed.
    Updated { before: MemberStatus, after: MemberStatus, text_changed: bool },
}

/// Brings the gym's member counters up to date with `change`, in the transaction `db` of the write:
/// the rows per status, and the members' version whenever what a search or a status filter
/// matches may have changed. Every writer of members calls this; nothing else writes them (a bulk
/// rebuild is `counters::recount`).
pub async fn count(db: &impl ConnectionTrait, gym_id: GymId, change: Change) -> Result<(), DbErr> {
    if let Some(statement) = count_statement(db.get_database_backend(), gym_id, change) {
        db.execute(statement).await?;
    }
    Ok(())
}

/// The statement of [`count`], for a [`crate::db::Writes`].
pub fn count_statement(backend: DbBackend, gym_id: GymId, change: Change) -> Option<Statement> {
    let mut deltas: Vec<(String, i64)> = Vec::new();
    let bump = match change {
        Change::Added(statuses) => {
            let mut by_status: HashMap<MemberStatus, i64> = HashMap::new();
            for s in &statuses {
                *by_status.entry(*s).or_default() += 1;
            }
            deltas.push((MEMBER_ROWS.name(None), i64::try_from(statuses.len()).unwrap_or(i64::MAX)));
            deltas.extend(by_status.into_iter().map(|(s, n)| (MEMBER_ROWS.name(Some(s.as_str())), n)));
            !statuses.is_empty()
        }
        Change::Updated { before, after, text_changed } => {
            if before != after {
                deltas.push((MEMBER_ROWS.name(Some(before.as_str())), -1));
                deltas.push((MEMBER_ROWS.name(Some(after.as_str())), 1));
            }
            text_changed || before != after
        }
    };
    if bump {
        deltas.extend(MEMBER_ROWS.written());
    }
    counters::add_many_statement(backend, gym_id, &deltas)
}

/// A member as the API returns it.
pub fn record(m: member::Model) -> Member {
    Member {
        object: MemberObject::Member,
        id: m.id.uuid(),
        first_name: m.first_name,
        last_name: m.last_name,
        email: m.email.into(),
        phone: m.phone.into(),
        gender: m.gender.into(),
        date_of_birth: m.date_of_birth.map(Date).into(),
        city: m.city.into(),
        country: m.country.into(),
        status: m.status.into(),
        facility_id: m.facility_id,
        access_card: m.access_card.into(),
        legacy_id: m.legacy_id.into(),
        visits_count: m.visits_count,
        last_visit_at: m.last_visit_at.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

/// Queues the webhook event of a member written through the API, in its transaction; whether a
/// delivery was queued (the dispatcher is woken after the commit).
pub async fn announce(db: &impl ConnectionTrait, gym_id: GymId, event: EventType, m: &Member) -> Result<bool, DbErr> {
    let data = crate::types::wire::value(m);
    webhooks::emit(db, gym_id, event, data).await
}

/// What of a member the schema cannot check: its email, access card and facility.
#[derive(Clone, Copy, Debug, Default)]
pub struct Claims<'a> {
    /// The member being changed, which may hold the email and the card already.
    pub member_id: Option<MemberId>,
    pub email: Option<&'a str>,
    pub access_card: Option<&'a str>,
    pub facility_id: Option<Uuid>,
}

/// The rules of a member the schema cannot state: the email and the access card are free within
/// the gym, the facility is the gym's. Every problem at once.
pub async fn check(db: &impl ConnectionTrait, gym_id: GymId, claims: Claims<'_>) -> Result<(), ApiError> {
    let mut errors = FieldErrors::new();
    let taken = |column: member::Column, value: String| {
        let mut q = member::Entity::find().filter(member::Column::GymId.eq(gym_id)).filter(column.eq(value));
        if let Some(id) = claims.member_id {
            q = q.filter(member::Column::Id.ne(id));
        }
        q
    };
    if let Some(email) = claims.email
        && taken(member::Column::EmailNormalized, normalized_email(email)).one(db).await?.is_some()
    {
        errors.add("email", EMAIL_TAKEN);
    }
    if let Some(card) = claims.access_card
        && taken(member::Column::AccessCard, card.to_string()).one(db).await?.is_some()
    {
        errors.add("access_card", CARD_TAKEN);
    }
    let facility_id = claims.facility_id;
    if let Some(fid) = facility_id {
        match entity::facility::Entity::find_by_id((gym_id, fid)).one(db).await? {
            None => errors.add("facility_id", "The selected facility_id is not a facility of this gym."),
            Some(f) if f.open_id.is_none() => errors.add("facility_id", ARCHIVED_FACILITY),
            Some(_) => {}
        }
    }
    errors.into_result()
}

/// A write of a member that the database refused, as the client should hear it: when a unique
/// key or the facility's foreign key refused it, the 422 of [`check`] (every problem at once, read
/// now, `db` outside the refused transaction), else the error itself. Writers insert first and
/// check only then: a write that breaks no rule costs no reads.
pub async fn refused(db: &impl ConnectionTrait, gym_id: GymId, claims: Claims<'_>, err: DbErr) -> ApiError {
    use sea_orm::SqlErr;
    let keyed =
        matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_) | SqlErr::ForeignKeyConstraintViolation(_)));
    if !keyed && !crate::facilities::archived_refusal(&err) {
        return err.into();
    }
    match check(db, gym_id, claims).await {
        Err(problems) => problems,
        // Gone again by now (a concurrent write rolled back): name what the database named.
        Ok(()) => taken(err),
    }
}

/// The 422 message of a facility that was archived (it takes no new members).
pub const ARCHIVED_FACILITY: &str = "The selected facility_id is archived; choose an open facility.";

/// The 422 message of an email another member of the gym holds.
pub const EMAIL_TAKEN: &str = "The email has already been taken.";

/// The 422 message of an access card another member of the gym holds.
pub const CARD_TAKEN: &str = "The access_card has already been taken.";

/// A unique violation on the gym's emails or cards (a concurrent write took one), or the refusal
/// of a facility archived meanwhile, as the 422 of [`check`]: the databases name the index (or
/// its columns) in the error.
pub fn taken(err: DbErr) -> ApiError {
    if crate::facilities::archived_refusal(&err) {
        return ApiError::invalid("facility_id", ARCHIVED_FACILITY);
    }
    if !crate::db::is_unique_violation(&err) {
        return err.into();
    }
    if err.to_string().contains("access_card") {
        ApiError::invalid("access_card", CARD_TAKEN)
    } else {
        ApiError::invalid("email", EMAIL_TAKEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(status: MemberStatus) -> member::Model {
        let at = Utc::now();
        member::Model {
            id: MemberId(Uuid::nil()),
            gym_id: GymId(Uuid::nil()),
            facility_id: Uuid::nil(),
            first_name: "Ada".into(),
            last_name: "Lovelace".into(),
            email: Some("Ada@Example.com".into()),
            email_normalized: Some("ada@example.com".into()),
            phone: Some("1".into()),
            gender: None,
            date_of_birth: None,
            city: None,
            country: None,
            status,
            legacy_id: None,
            visits_count: 0,
            entries_count: 0,
            search_text: search_text("Ada", "Lovelace", Some("Ada@Example.com")),
            access_card: None,
            last_visit_at: None,
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn derived_fields_follow_the_fields_they_derive_from() {
        let edited = edit(stored(MemberStatus::Active), Edit { email: Some(None), ..Edit::default() }, Utc::now());
        assert_eq!(edited.model.search_text, Set("ada lovelace\n".to_string()));
        assert_eq!(edited.model.email_normalized, Set(None));
        assert_eq!(
            edited.change,
            Change::Updated { before: MemberStatus::Active, after: MemberStatus::Active, text_changed: true }
        );
        let phone = Edit { phone: Some(None), city: Some(Some("London".into())), ..Edit::default() };
        let edited = edit(stored(MemberStatus::Active), phone, Utc::now());
        assert_eq!((edited.model.phone, edited.model.city), (Set(None), Set(Some("London".into()))));
        assert!(matches!(edited.change, Change::Updated { text_changed: false, .. }));
    }
}

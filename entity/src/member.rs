use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A member of a gym.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "members")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: MemberId,
    pub facility_id: Uuid,
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    /// Lowercased email, unique per gym.
    pub email_normalized: Option<String>,
    pub phone: Option<String>,
    pub gender: Option<String>,
    pub date_of_birth: Option<Date>,
    pub city: Option<String>,
    pub country: Option<String>,
    pub status: MemberStatus,
    pub legacy_id: Option<String>,
    pub visits_count: i64,
    /// The member's attendance entries (check-ins and door events, every status): one member's
    /// page of attendance takes its total from it. Kept by every writer of attendance.
    pub entries_count: i64,
    /// `"first last\nemail"`, Unicode-lowercased by the service; what `search` matches.
    pub search_text: String,
    /// The access card the door reads, unique per gym (compared as is, case included).
    pub access_card: Option<String>,
    pub last_visit_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! Typed ids: a gym's id and a member's id are different types, so one cannot be passed where the
//! other is wanted. Each is a UUID in the database and on the wire (serialized as the bare UUID),
//! and a column of the entities here.
//!
//! A member's id goes where a member's id is wanted:
//!
//! ```
//! fn wants_a_member(_: entity::ids::MemberId) {}
//! wants_a_member(entity::ids::MemberId::generate());
//! ```
//!
//! and a gym's id does not:
//!
//! ```compile_fail,E0308
//! fn wants_a_member(_: entity::ids::MemberId) {}
//! wants_a_member(entity::ids::GymId::generate());
//! ```

use std::fmt;

use sea_orm::{DbErr, DeriveValueType, TryFromU64};
use uuid::Uuid;

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
            DeriveValueType,
        )]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new id: UUIDv7, so ids sort by creation time (as every record id of the service).
            pub fn generate() -> Self {
                Self(Uuid::now_v7())
            }

            /// The UUID itself, for the wire and for statements written by hand.
            pub fn uuid(self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        /// Keys are made by the service (UUIDv7), never by the database's counter.
        impl TryFromU64 for $name {
            fn try_from_u64(_: u64) -> Result<Self, DbErr> {
                Err(DbErr::ConvertFromU64(stringify!($name)))
            }
        }
    };
}

typed_id!(
    /// A gym's id: the tenant every gym-scoped row belongs to (a sandbox is a gym of its own).
    GymId
);
typed_id!(
    /// A member's id, unique within its gym.
    MemberId
);

//! Members' memberships become readable (`GET /member-memberships`, `GET /members/{id}/memberships`):
//! their table gains the two indexes every listed table has, newest first within a gym
//! `(gym_id, created_at, id)` and `updated_since` `(gym_id, updated_at)`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const TABLE: &str = "member_memberships";
const INDEXES: [(&str, &[&str]); 2] = [
    ("ix_member_memberships_gym_created", &["gym_id", "created_at", "id"]),
    ("ix_member_memberships_gym_updated", &["gym_id", "updated_at"]),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, columns) in INDEXES {
            let mut stmt = Index::create();
            stmt.name(name).table(Alias::new(TABLE)).if_not_exists();
            for c in columns {
                stmt.col(Alias::new(*c));
            }
            manager.create_index(stmt.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, _) in INDEXES {
            manager.drop_index(Index::drop().name(name).table(Alias::new(TABLE)).to_owned()).await?;
        }
        Ok(())
    }
}

//! One member's page of check-ins or sales is read in the list's order along an index: the
//! member's indexes gain `id`, the order's tie-breaker, so that a page (or a cursor's next page)
//! reads its own rows instead of sorting every row of the member.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Table, old index, new index name, columns of the new one.
const MOVES: [(&str, &str, &str, [&str; 4]); 2] = [
    ("attendance", "gym_member_occurred", "gym_member_occurred_id", ["gym_id", "member_id", "occurred_at", "id"]),
    ("purchases", "gym_member_purchased", "gym_member_purchased_id", ["gym_id", "member_id", "purchased_at", "id"]),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (table, old, new, columns) in MOVES {
            manager.create_index(index(table, new, &columns, false)).await?;
            manager.drop_index(Index::drop().name(format!("ix_{table}_{old}")).table(a(table)).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (table, old, new, columns) in MOVES {
            manager.create_index(index(table, old, &columns[..3], false)).await?;
            manager.drop_index(Index::drop().name(format!("ix_{table}_{new}")).table(a(table)).to_owned()).await?;
        }
        Ok(())
    }
}

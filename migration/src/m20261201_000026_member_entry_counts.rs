//! Each member keeps the count of their attendance entries (`entries_count`: check-ins and door
//! events, every status), written by every writer of attendance beside `visits_count`: one
//! member's page of `GET /attendance` takes its total from it instead of counting the member's
//! history. The counts of the entries already written are filled in here.

use sea_orm_migration::prelude::*;

use crate::columns::a;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(a("entries_count")).big_integer().not_null().default(0).to_owned();
        manager.alter_table(Table::alter().table(a("members")).add_column(column).to_owned()).await?;
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE members SET entries_count = counted.n FROM (\
                 SELECT gym_id, member_id, COUNT(*) AS n FROM attendance WHERE member_id IS NOT NULL \
                 GROUP BY gym_id, member_id) AS counted \
                 WHERE members.gym_id = counted.gym_id AND members.id = counted.member_id",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(a("members")).drop_column(a("entries_count")).to_owned()).await
    }
}

//! Column, key and index builders shared by the migrations written after it: every tenant table
//! keyed by `(gym_id, id)`, its foreign keys to other tenant tables leading with `gym_id`.

use sea_orm_migration::prelude::*;

pub(crate) fn a(name: &str) -> Alias {
    Alias::new(name)
}

pub(crate) fn uuid(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).uuid().not_null().to_owned()
}

pub(crate) fn uuid_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).uuid().null().to_owned()
}

pub(crate) fn string(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).string().not_null().to_owned()
}

pub(crate) fn string_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).string().null().to_owned()
}

pub(crate) fn ts(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).timestamp_with_time_zone().not_null().to_owned()
}

pub(crate) fn ts_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).timestamp_with_time_zone().null().to_owned()
}

/// `(gym_id, column)` of `table` references `(gym_id, id)` of `target`.
pub(crate) fn tenant_fk(table: &str, column: &str, target: &str, cascade: bool) -> ForeignKeyCreateStatement {
    let mut fk = ForeignKey::create();
    fk.name(format!("fk_{table}_gym_{column}"))
        .from_tbl(a(table))
        .from_col(a("gym_id"))
        .from_col(a(column))
        .to_tbl(a(target))
        .to_col(a("gym_id"))
        .to_col(a("id"));
    if cascade {
        fk.on_delete(ForeignKeyAction::Cascade);
    }
    fk.to_owned()
}

pub(crate) fn gym_fk(table: &str) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(format!("fk_{table}_gym_id"))
        .from(a(table), a("gym_id"))
        .to(a("gyms"), a("id"))
        .to_owned()
}

pub(crate) fn table(
    name: &str,
    columns: Vec<ColumnDef>,
    foreign_keys: Vec<ForeignKeyCreateStatement>,
) -> TableCreateStatement {
    let mut t = Table::create();
    t.table(a(name)).if_not_exists();
    for c in columns {
        t.col(c);
    }
    t.primary_key(Index::create().col(a("gym_id")).col(a("id")));
    for mut fk in foreign_keys {
        t.foreign_key(&mut fk);
    }
    t.to_owned()
}

pub(crate) fn index(table: &str, name: &str, columns: &[&str], unique: bool) -> IndexCreateStatement {
    let mut ix = Index::create();
    ix.name(format!("ix_{table}_{name}")).table(a(table));
    for c in columns {
        ix.col(a(c));
    }
    if unique {
        ix.unique();
    }
    ix.to_owned()
}

pub(crate) fn big(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).big_integer().not_null().to_owned()
}

pub(crate) fn big_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).big_integer().null().to_owned()
}

pub(crate) fn int(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).integer().not_null().to_owned()
}

/// Creates tenant table `name` (`table`, without foreign keys) with `foreign_keys`. On a database
/// distributed over a Citus cluster a new table cannot refer to a distributed one: it is made
/// without its keys, distributed by gym beside the other tenant tables, then given them. Every
/// migration that makes a tenant table makes it through here.
pub(crate) async fn create_tenant_table(
    manager: &SchemaManager<'_>,
    name: &str,
    mut table: TableCreateStatement,
    foreign_keys: Vec<ForeignKeyCreateStatement>,
) -> Result<(), DbErr> {
    if !crate::citus::is_distributed(manager.get_connection()).await? {
        for mut fk in foreign_keys {
            table.foreign_key(&mut fk);
        }
        return manager.create_table(table).await;
    }
    // A migration runs in one transaction, in which Citus lets a new foreign key follow the
    // distribution of a table only when its shards were made one connection at a time.
    manager.get_connection().execute_unprepared("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'").await?;
    manager.create_table(table).await?;
    crate::citus::distribute_table(manager.get_connection(), name).await?;
    for fk in foreign_keys {
        manager.create_foreign_key(fk).await?;
    }
    Ok(())
}

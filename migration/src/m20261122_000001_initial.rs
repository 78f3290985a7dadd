//! The whole data model. Every table holding gym data carries `gym_id`, and every index and unique
//! key on it leads with `gym_id`, so that every list query is served by a tenant-first index and the
//! tables can be distributed by `gym_id` on a distributed PostgreSQL without a rewrite.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn a(name: &str) -> Alias {
    Alias::new(name)
}
fn id() -> ColumnDef {
    ColumnDef::new(a("id")).uuid().not_null().primary_key().to_owned()
}
fn uuid(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).uuid().not_null().to_owned()
}
fn uuid_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).uuid().null().to_owned()
}
fn string(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).string().not_null().to_owned()
}
fn string_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).string().null().to_owned()
}
fn text(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).text().not_null().to_owned()
}
fn text_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).text().null().to_owned()
}
fn boolean(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).boolean().not_null().to_owned()
}
fn big(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).big_integer().not_null().to_owned()
}
fn int(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).integer().not_null().to_owned()
}
fn int_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).integer().null().to_owned()
}
fn ts(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).timestamp_with_time_zone().not_null().to_owned()
}
fn ts_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).timestamp_with_time_zone().null().to_owned()
}
fn date(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).date().not_null().to_owned()
}
fn date_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).date().null().to_owned()
}

/// `table.column` references `to.id`.
fn fk(table: &str, column: &str, to: &str) -> ForeignKeyCreateStatement {
    ForeignKey::create().name(format!("fk_{table}_{column}")).from(a(table), a(column)).to(a(to), a("id")).to_owned()
}

fn index(table: &str, name: &str, columns: &[&str], unique: bool) -> IndexCreateStatement {
    let mut stmt = Index::create();
    stmt.name(format!("ix_{table}_{name}")).table(a(table));
    for c in columns {
        stmt.col(a(c));
    }
    if unique {
        stmt.unique();
    }
    stmt.to_owned()
}

struct TableSpec {
    name: &'static str,
    columns: Vec<ColumnDef>,
    foreign_keys: Vec<ForeignKeyCreateStatement>,
    indexes: Vec<IndexCreateStatement>,
    primary_key: Option<&'static [&'static str]>,
}

fn tables() -> Vec<TableSpec> {
    let gym_fk = |t: &str| fk(t, "gym_id", "gyms");
    let record_indexes = |t: &str| {
        vec![
            index(t, "gym_created", &["gym_id", "created_at", "id"], false),
            index(t, "gym_updated", &["gym_id", "updated_at"], false),
            index(t, "gym_legacy", &["gym_id", "legacy_id"], true),
        ]
    };
    vec![
        TableSpec {
            name: "gyms",
            columns: vec![
                id(),
                string("name"),
                string("timezone"),
                uuid_null("parent_gym_id"),
                boolean("api_access"),
                boolean("device_access"),
                string("subscription_status"),
                ts_null("grace_ends_at"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![fk("gyms", "parent_gym_id", "gyms")],
            indexes: vec![index("gyms", "parent", &["parent_gym_id"], true)],
            primary_key: None,
        },
        TableSpec {
            name: "facilities",
            columns: vec![id(), uuid("gym_id"), string("name"), ts("created_at"), ts("updated_at")],
            foreign_keys: vec![gym_fk("facilities")],
            indexes: vec![index("facilities", "gym_created", &["gym_id", "created_at", "id"], false)],
            primary_key: None,
        },
        TableSpec {
            name: "users",
            columns: vec![
                id(),
                uuid("gym_id"),
                string("email"),
                string("password_hash"),
                string("role"),
                string("permissions"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("users")],
            indexes: vec![
                index("users", "email", &["email"], true),
                index("users", "gym", &["gym_id", "email"], false),
            ],
            primary_key: None,
        },
        TableSpec {
            name: "api_keys",
            columns: vec![
                id(),
                uuid("gym_id"),
                string("name"),
                string("environment"),
                string("fingerprint"),
                string("prefix"),
                ts("created_at"),
                ts_null("last_used_at"),
                ts_null("expires_at"),
                ts_null("revoked_at"),
                uuid_null("replaced_by_id"),
            ],
            foreign_keys: vec![gym_fk("api_keys")],
            indexes: vec![
                index("api_keys", "fingerprint", &["fingerprint"], true),
                index("api_keys", "gym_created", &["gym_id", "created_at"], false),
            ],
            primary_key: None,
        },
        TableSpec {
            name: "members",
            columns: vec![
                id(),
                uuid("gym_id"),
                uuid("facility_id"),
                string("first_name"),
                string("last_name"),
                string_null("email"),
                string_null("email_normalized"),
                string_null("phone"),
                string_null("gender"),
                date_null("date_of_birth"),
                string_null("city"),
                string_null("country"),
                string("status"),
                string_null("legacy_id"),
                big("visits_count"),
                ts_null("last_visit_at"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("members"), fk("members", "facility_id", "facilities")],
            indexes: {
                let mut ix = record_indexes("members");
                ix.push(index("members", "gym_status_created", &["gym_id", "status", "created_at", "id"], false));
                ix.push(index("members", "gym_email", &["gym_id", "email_normalized"], true));
                ix
            },
            primary_key: None,
        },
        TableSpec {
            name: "membership_plans",
            columns: vec![
                id(),
                uuid("gym_id"),
                string("name"),
                text_null("description"),
                big("price_amount"),
                string("currency"),
                int_null("duration_days"),
                int_null("visit_limit"),
                string("status"),
                string_null("legacy_id"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("membership_plans")],
            indexes: record_indexes("membership_plans"),
            primary_key: None,
        },
        TableSpec {
            name: "subscription_plans",
            columns: vec![
                id(),
                uuid("gym_id"),
                string("name"),
                text_null("description"),
                big("price_amount"),
                string("currency"),
                string("billing_interval"),
                int("billing_interval_count"),
                string("status"),
                string_null("legacy_id"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("subscription_plans")],
            indexes: record_indexes("subscription_plans"),
            primary_key: None,
        },
        TableSpec {
            name: "member_memberships",
            columns: vec![
                id(),
                uuid("gym_id"),
                uuid("member_id"),
                uuid_null("membership_plan_id"),
                uuid_null("subscription_plan_id"),
                date("starts_on"),
                date_null("ends_on"),
                string_null("legacy_id"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("member_memberships")],
            indexes: vec![
                index("member_memberships", "gym_period", &["gym_id", "starts_on", "ends_on"], false),
                index("member_memberships", "gym_member", &["gym_id", "member_id"], false),
                index("member_memberships", "gym_legacy", &["gym_id", "legacy_id"], true),
            ],
            primary_key: None,
        },
        TableSpec {
            name: "attendance",
            columns: vec![
                id(),
                uuid("gym_id"),
                uuid("facility_id"),
                uuid_null("member_id"),
                string("kind"),
                string("status"),
                ts("occurred_at"),
                string_null("legacy_id"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("attendance")],
            indexes: vec![
                index("attendance", "gym_occurred", &["gym_id", "occurred_at", "id"], false),
                index("attendance", "gym_member_occurred", &["gym_id", "member_id", "occurred_at"], false),
                index("attendance", "gym_updated", &["gym_id", "updated_at"], false),
                // Check-ins and door events come from different legacy tables: separate id spaces.
                index("attendance", "gym_kind_legacy", &["gym_id", "kind", "legacy_id"], true),
            ],
            primary_key: None,
        },
        TableSpec {
            name: "products",
            columns: vec![
                id(),
                uuid("gym_id"),
                string("name"),
                text_null("description"),
                string_null("sku"),
                big("price_amount"),
                string("currency"),
                string("status"),
                string_null("legacy_id"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("products")],
            indexes: {
                let mut ix = record_indexes("products");
                ix.push(index("products", "gym_status_created", &["gym_id", "status", "created_at", "id"], false));
                ix
            },
            primary_key: None,
        },
        TableSpec {
            name: "purchases",
            columns: vec![
                id(),
                uuid("gym_id"),
                uuid_null("member_id"),
                uuid_null("product_id"),
                string("description"),
                int("quantity"),
                big("total_amount"),
                string("currency"),
                string("payment_status"),
                ts("purchased_at"),
                string_null("legacy_id"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("purchases")],
            indexes: vec![
                index("purchases", "gym_purchased", &["gym_id", "purchased_at", "id"], false),
                index("purchases", "gym_member_purchased", &["gym_id", "member_id", "purchased_at"], false),
                index("purchases", "gym_payment_purchased", &["gym_id", "payment_status", "purchased_at"], false),
                index("purchases", "gym_updated", &["gym_id", "updated_at"], false),
                index("purchases", "gym_legacy", &["gym_id", "legacy_id"], true),
            ],
            primary_key: None,
        },
        TableSpec {
            name: "webhook_endpoints",
            columns: vec![
                id(),
                uuid("gym_id"),
                text("url"),
                text_null("event_types"),
                boolean("enabled"),
                string("secret"),
                string_null("previous_secret"),
                ts_null("previous_secret_expires_at"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![gym_fk("webhook_endpoints")],
            indexes: vec![index("webhook_endpoints", "gym", &["gym_id", "created_at"], false)],
            primary_key: None,
        },
        TableSpec {
            name: "webhook_events",
            columns: vec![id(), uuid("gym_id"), string("event_type"), text("payload"), ts("created_at")],
            foreign_keys: vec![gym_fk("webhook_events")],
            indexes: vec![index("webhook_events", "gym_created", &["gym_id", "created_at"], false)],
            primary_key: None,
        },
        TableSpec {
            name: "webhook_deliveries",
            columns: vec![
                id(),
                uuid("gym_id"),
                uuid("endpoint_id"),
                uuid("event_id"),
                string("event_type"),
                string("status"),
                text("attempts"),
                int("attempt_count"),
                ts_null("next_attempt_at"),
                ts("created_at"),
                ts("updated_at"),
            ],
            foreign_keys: vec![
                gym_fk("webhook_deliveries"),
                fk("webhook_deliveries", "endpoint_id", "webhook_endpoints"),
            ],
            indexes: vec![
                index("webhook_deliveries", "gym_created", &["gym_id", "created_at", "id"], false),
                // The dispatcher's queue: due deliveries across gyms.
                index("webhook_deliveries", "due", &["status", "next_attempt_at"], false),
            ],
            primary_key: None,
        },
        TableSpec {
            name: "import_counters",
            columns: vec![
                uuid("gym_id"),
                string("entity"),
                big("received"),
                big("created"),
                big("skipped"),
                ts_null("last_batch_at"),
            ],
            foreign_keys: vec![gym_fk("import_counters")],
            indexes: vec![],
            primary_key: Some(&["gym_id", "entity"]),
        },
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for spec in tables() {
            let mut table = Table::create();
            table.table(a(spec.name)).if_not_exists();
            for c in spec.columns {
                table.col(c);
            }
            if let Some(pk) = spec.primary_key {
                let mut key = Index::create();
                for c in pk {
                    key.col(a(c));
                }
                table.primary_key(&mut key);
            }
            for mut f in spec.foreign_keys {
                table.foreign_key(&mut f);
            }
            manager.create_table(table).await?;
            for ix in spec.indexes {
                manager.create_index(ix).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for spec in tables().into_iter().rev() {
            manager.drop_table(Table::drop().table(a(spec.name)).if_exists().to_owned()).await?;
        }
        Ok(())
    }
}

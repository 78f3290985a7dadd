//! `Members`: the one resource an integration writes to.

use entity::ids::GymId;
use entity::member;
use poem_openapi::types::MaybeUndefined;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait, QueryFilter, QueryTrait,
    TryIntoModel,
    sea_query::{Expr, LikeExpr, Query, SimpleExpr},
};

use super::{Handlers, find_in_gym};
use crate::listing::Envelope;
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    accounts,
    context::RequestContext,
    counters::{
        self,
        search_totals::{self, Search},
    },
    db::Writes,
    errors::ApiError,
    members::{self, Change, Claims, Edit, Edited, NewMember},
    pagination::{Page, ask},
    records::{now, rfc3339},
    webhooks::{self, EventType},
};

const KIND: &str = "member";

/// Below this many search matches, PostgreSQL is steered to the trigram index (see `list_members`).
const FENCE_BELOW: i64 = 2_000;

/// `%term%` for LIKE, lowercased, with the wildcards of the term escaped (`\\` escapes).
fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    for c in term.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

async fn find(db: &impl ConnectionTrait, gym_id: GymId, id: &str) -> Result<member::Model, ApiError> {
    find_in_gym::<member::Entity>(db, gym_id, KIND, id).await
}

/// What `search` matches. On PostgreSQL the pattern is written into the statement as a literal.
/// As a bound parameter, the plan the server caches for a prepared statement after its fifth run
/// (a generic plan) cannot see the pattern, and it joined the trigram index with a scan of the
/// gym's `created_at` index: counting a search with one match among 100,000 members took 12 ms
/// instead of 0.2 ms. Each distinct term is then a statement of its own, prepared once per
/// connection.
fn search_condition(backend: DbBackend, term: &str) -> SimpleExpr {
    let pattern = like_pattern(term);
    match backend {
        DbBackend::Postgres => {
            Expr::cust(format!("\"members\".\"search_text\" LIKE {} ESCAPE E'\\\\'", pg_literal(&pattern)))
        }
        _ => Expr::col((member::Entity, member::Column::SearchText)).like(LikeExpr::new(pattern).escape('\\')),
    }
}

/// The count's `created_at <= as_of`. On PostgreSQL it is written `(...) IS TRUE` (the same
/// rows: the column is never null), which no index can serve. The plan PostgreSQL caches for the
/// prepared count after five runs (a generic plan) cannot see the gym, so it takes every gym for
/// an average one of a few hundred members; offered a range on the `(gym_id, created_at)` index,
/// it walked the whole gym with it and tested each row: counting `ada` in the 100,000-member gym
/// took 72 ms that way against 21-32 ms through the trigram index, which it now always uses.
fn created_by(backend: DbBackend, as_of: chrono::DateTime<chrono::Utc>) -> SimpleExpr {
    match backend {
        DbBackend::Postgres => Expr::cust_with_values("(\"members\".\"created_at\" <= $1) IS TRUE", [as_of]),
        _ => member::Column::CreatedAt.lte(as_of),
    }
}

/// `text` as a PostgreSQL string literal: an escape string (`E'...'`) with its backslashes and
/// quotes doubled, which reads the same whatever `standard_conforming_strings` says. (Terms
/// cannot hold NUL: the contract refuses it in every parameter.)
fn pg_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 3);
    out.push_str("E'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

impl Handlers {
    /// The members a search finds at the page's `as_of` (`filtered`), from what is kept for the
    /// gym's members' version when it can be (see `search_totals`: the version is read before the
    /// count, and a count is kept only when it takes in every member).
    async fn search_total(
        &self,
        ctx: &RequestContext,
        p: &ListMembersParams,
        term: &str,
        page: &Page,
        filtered: sea_orm::Select<member::Entity>,
    ) -> Result<i64, ApiError> {
        let kept = match p.updated_since {
            Some(_) => None,
            None => {
                let state = search_totals::members_state(self.db(), ctx.tenant.gym_id).await?;
                let search = Search {
                    gym_id: ctx.tenant.gym_id,
                    status: p.status.map(|s| s.as_str()),
                    pattern: like_pattern(term),
                };
                let all = state.newest.is_none_or(|newest| page.as_of >= newest);
                all.then_some((search, state.version))
            }
        };
        if let Some(total) = kept.as_ref().and_then(|(search, version)| self.state.search_totals.get(search, *version))
        {
            return Ok(total);
        }
        let total = i64::try_from(filtered.count(self.db()).await?).unwrap_or(i64::MAX);
        if let Some((search, version)) = kept {
            self.state.search_totals.put(search, version, total);
        }
        Ok(total)
    }
}

impl MembersApi for Handlers {
    async fn list_members(&self, ctx: &RequestContext, p: ListMembersParams) -> Result<ListMembersResponse, ApiError> {
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("status", p.status.map(|s| s.as_str().to_string()));
        page.filter("search", p.search.clone());
        page.filter("updated_since", p.updated_since.map(rfc3339));
        let mut select = member::Entity::find().filter(member::Column::GymId.eq(ctx.tenant.gym_id));
        if let Some(s) = p.status {
            select = select.filter(member::Column::Status.eq(s.as_str()));
        }
        // Literal, as documented: spaces included (a whitespace-only term finds what contains it).
        let search = p.search.as_deref().filter(|t| !t.is_empty());
        if let Some(t) = p.updated_since {
            select = select.filter(member::Column::UpdatedAt.gte(t));
        }
        // A walk's later page has its total from the page before it: nothing to count then.
        let walk_total = page.locate(self.db()).await?;
        let mut counted = None;
        if let Some(term) = search {
            let backend = self.db().get_database_backend();
            let matches = search_condition(backend, term);
            let total = match walk_total {
                Some(total) => total,
                None => {
                    let filtered = select.clone().filter(matches.clone()).filter(created_by(backend, page.as_of));
                    self.search_total(ctx, &p, term, &page, filtered).await?
                }
            };
            counted = Some(total);
            select = if backend == DbBackend::Postgres && total <= FENCE_BELOW {
                // Few matches: left to itself PostgreSQL walks the created_at index testing every
                // row; fenced (`OFFSET 0` stops it from flattening the subquery), the trigram index
                // finds the matches first and only those are sorted. Many matches: the index walk
                // meets a page of them at once.
                let fenced = Query::select()
                    .column(member::Column::Id)
                    .from(member::Entity)
                    .and_where(member::Column::GymId.eq(ctx.tenant.gym_id))
                    .and_where(matches)
                    .offset(0)
                    .to_owned();
                select.filter(member::Column::Id.in_subquery(fenced))
            } else {
                select.filter(matches)
            };
        }
        // Without search or updated_since the total comes from the gym's counters.
        let known_total = match (walk_total, search, p.updated_since) {
            (Some(total), _, _) => Some(total),
            (None, None, None) => Some(
                counters::members_as_of(self.db(), ctx.tenant.gym_id, p.status.map(|s| s.as_str()), page.as_of).await?,
            ),
            _ => counted,
        };
        let rows = page
            .fetch(
                self.db(),
                select,
                member::Column::CreatedAt,
                member::Column::CreatedAt,
                member::Column::Id,
                known_total,
            )
            .await?;
        Ok(ListMembersResponse::Ok(Json(MemberList::of(&page, rows.into_iter().map(members::record)))))
    }

    async fn create_member(
        &self,
        ctx: &RequestContext,
        p: CreateMemberParams,
    ) -> Result<CreateMemberResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let gym_id = ctx.tenant.gym_id;
        let b = p.body;
        let email = b.email.take().map(|e| e.0);
        let facility_id = b.facility_id.take();
        let access_card = b.access_card.take();
        let facility = match facility_id.or(ctx.tenant.first_facility_id) {
            Some(id) => id,
            None => {
                accounts::first_facility(&db, gym_id)
                    .await?
                    .ok_or_else(|| ApiError::invalid("facility_id", "This gym has no facility; give a facility_id."))?
                    .id
            }
        };
        let status = b.status.unwrap_or(MemberStatus::Active).into();
        let new = NewMember {
            first_name: b.first_name,
            last_name: b.last_name,
            email: email.clone(),
            phone: b.phone.take(),
            gender: b.gender.take(),
            date_of_birth: b.date_of_birth.take().map(|d| d.0),
            city: b.city.take(),
            country: b.country.take(),
            status,
            facility_id: facility,
            access_card: access_card.clone(),
            legacy_id: None,
        };
        let row = members::row(gym_id, new, now());
        let member = members::record(row.clone().try_into_model()?);
        // Written first, checked only if the database refuses it (`members::refused`). The gym's
        // webhook endpoints are read before the transaction, so that on SQLite the file's writer
        // waits for no read.
        let backend = db.get_database_backend();
        let mut writes = Writes::new();
        writes.push(member::Entity::insert(row).build(backend));
        writes.extend(members::count_statement(backend, gym_id, Change::Added(vec![status])));
        let data = crate::types::wire::value(&member);
        let queued = webhooks::emit_counted(&db, &mut writes, gym_id, EventType::MemberCreated, data).await?;
        // What answers when the database refuses these writes: now, or, for a keyed write that
        // sends them with its commit, then (outside the write, whose transaction is gone).
        let (plain, claimed) = (self.db().clone(), (email.clone(), access_card.clone()));
        let refusal = move |e| async move {
            let (email, access_card) = claimed;
            let claims = Claims {
                email: email.as_deref(),
                access_card: access_card.as_deref(),
                facility_id,
                ..Claims::default()
            };
            members::refused(&plain, gym_id, claims, e).await
        };
        let Some((writes, refusal)) = crate::db::defer_to_commit(&db, writes, refusal) else {
            webhooks::wake_if(&db, &self.state.webhooks, queued).await;
            return Ok(CreateMemberResponse::Created(Json(member)));
        };
        let txn = crate::db::begin_writing(&db).await?;
        if let Err(e) = writes.run(&txn).await {
            drop(txn);
            return Err(refusal(e).await);
        }
        txn.commit().await.map_err(members::taken)?;
        webhooks::wake_if(&db, &self.state.webhooks, queued).await;
        Ok(CreateMemberResponse::Created(Json(member)))
    }

    async fn get_member(&self, ctx: &RequestContext, p: GetMemberParams) -> Result<GetMemberResponse, ApiError> {
        let m = find(self.db(), ctx.tenant.gym_id, &p.id).await?;
        Ok(GetMemberResponse::Ok(Json(members::record(m))))
    }

    async fn replace_member(
        &self,
        ctx: &RequestContext,
        p: ReplaceMemberParams,
    ) -> Result<ReplaceMemberResponse, ApiError> {
        let m = update(self, ctx, &p.id, p.body).await?;
        Ok(ReplaceMemberResponse::Ok(Json(m)))
    }

    async fn update_member(
        &self,
        ctx: &RequestContext,
        p: UpdateMemberParams,
    ) -> Result<UpdateMemberResponse, ApiError> {
        let m = update(self, ctx, &p.id, p.body).await?;
        Ok(UpdateMemberResponse::Ok(Json(m)))
    }
}

/// PUT and PATCH alike: only the given fields change; `null` clears an optional field. The
/// transaction reads before it writes, so on SQLite it takes the write lock first
/// (`db::begin_writing`).
async fn update(h: &Handlers, ctx: &RequestContext, id: &str, b: MemberUpdate) -> Result<Member, ApiError> {
    let gym_id = ctx.tenant.gym_id;
    // A keyed write's handle when the request is one (PUT and PATCH take an Idempotency-Key).
    let db = ctx.db(h.db());
    let txn = crate::db::begin_writing(&db).await?;
    let current = find(&txn, gym_id, id).await?;
    let edit = Edit {
        first_name: b.first_name,
        last_name: b.last_name,
        email: optional(b.email.map_value(|e| e.0)),
        phone: optional(b.phone),
        gender: optional(b.gender),
        date_of_birth: optional(b.date_of_birth.map_value(|d| d.0)),
        city: optional(b.city),
        country: optional(b.country),
        status: b.status.map(Into::into),
        facility_id: b.facility_id,
        access_card: optional(b.access_card),
    };
    let claims = Claims {
        member_id: Some(current.id),
        email: edit.email.as_ref().and_then(Option::as_deref),
        access_card: edit.access_card.as_ref().and_then(Option::as_deref),
        facility_id: edit.facility_id,
    };
    members::check(&txn, gym_id, claims).await?;
    let Edited { model, change } = members::edit(current, edit, now());
    let saved = model.update(&txn).await.map_err(members::taken)?;
    members::count(&txn, gym_id, change).await?;
    let member = members::record(saved);
    let queued = members::announce(&txn, gym_id, EventType::MemberUpdated, &member).await?;
    txn.commit().await.map_err(members::taken)?;
    if queued {
        crate::webhooks::wake(&db, &h.state.webhooks).await;
    }
    Ok(member)
}

/// A PATCH field as an edit: absent leaves it, `null` clears it.
fn optional<T>(value: MaybeUndefined<T>) -> Option<Option<T>> {
    match value {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(v) => Some(Some(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::{like_pattern, pg_literal};

    #[test]
    fn search_terms_are_literal_in_like() {
        assert_eq!(like_pattern("Ada"), "%ada%");
        assert_eq!(like_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
    }

    #[test]
    fn postgres_literals_double_quotes_and_backslashes() {
        assert_eq!(pg_literal("%ada%"), "E'%ada%'");
        assert_eq!(pg_literal("o'b\\_'; --"), "E'o''b\\\\_''; --'");
        assert_eq!(pg_literal("jürgen"), "E'jürgen'");
    }
}

//! What every list endpoint of both APIs shares: the tenant's rows of one table, one page of them
//! pinned at the walk's `as_of`, their total, and the envelope (`data`, `links`, `meta`) around
//! them.

use chrono::{DateTime, Utc};
use entity::ids::MemberId;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Select};

use crate::{
    context::RequestContext,
    counters,
    db::Db,
    errors::ApiError,
    openapi::{self, *},
    pagination::Page,
    records::rfc3339,
};

/// How a list of one table is scoped, ordered and counted.
pub struct Listing<C> {
    pub gym: C,
    pub created: C,
    pub updated: C,
    /// Newest first by this column, then by `id`.
    pub order: C,
    pub id: C,
    /// The counters behind the total, if the gym keeps any for this list.
    pub counted: Option<counters::Counted>,
}

/// The [`Listing`] of a table with the usual columns (`gym_id`, `created_at`, `updated_at`, `id`),
/// newest first by `$order`.
macro_rules! listing {
    ($table:ident, $order:ident, $counted:expr) => {
        $crate::listing::Listing {
            gym: $table::Column::GymId,
            created: $table::Column::CreatedAt,
            updated: $table::Column::UpdatedAt,
            order: $table::Column::$order,
            id: $table::Column::Id,
            counted: $counted,
        }
    };
}
pub(crate) use listing;

/// Where a list's total comes from, for the filters a request set (besides `updated_since`, whose
/// rows are always counted).
#[derive(Clone, Copy, Debug)]
pub enum Total<'a> {
    /// A filter outside every kept count is set: the rows are counted (once per walk).
    Counted,
    /// The gym's counters of the listing's list know it: the whole list, or one label value.
    Kept(Option<&'a str>),
    /// One member's attendance entries, from the member's own count.
    MemberEntries(MemberId),
}

/// One page of the tenant's rows of `select` (already narrowed by the list's own filters), with
/// `updated_since` (kept in the page's links) and the walk pinned at `as_of`, its total from
/// where `total` says.
pub async fn list_page<E>(
    db: &Db,
    ctx: &RequestContext,
    page: &mut Page,
    select: Select<E>,
    l: Listing<E::Column>,
    updated_since: Option<DateTime<Utc>>,
    total: Total<'_>,
) -> Result<Vec<E::Model>, ApiError>
where
    E: EntityTrait,
    E::Model: Sync,
{
    page.filter("updated_since", updated_since.map(rfc3339));
    let mut select = select.filter(l.gym.eq(ctx.tenant.gym_id));
    if let Some(t) = updated_since {
        select = select.filter(l.updated.gte(t));
    }
    let total = if updated_since.is_some() { Total::Counted } else { total };
    let gym_id = ctx.tenant.gym_id;
    // A walk's later page has its total from the page before it: nothing to count then.
    let known = match (page.locate(db).await?, total, l.counted) {
        (Some(total), _, _) => Some(total),
        (None, Total::MemberEntries(member), _) => {
            Some(counters::member_entries_as_of(db, gym_id, member, page.as_of).await?)
        }
        (None, Total::Kept(label), Some(list)) => {
            let total = counters::total_as_of(db, gym_id, list, label, page.as_of).await?;
            // A deep page found by its number starts from the day its counts say it falls in.
            if page.is_deep(total) {
                let at = (page.offset(), total);
                let start = counters::days::start(db, gym_id, list, label, page.as_of, at).await?;
                if let Some(start) = start {
                    page.start_at(start.before, start.skip);
                }
            }
            Some(total)
        }
        _ => None,
    };
    page.fetch(db, select, l.created, l.order, l.id, known).await
}

/// A list response of the document: its records, with the page's links and meta.
pub trait Envelope: Sized {
    type Item;

    fn from_parts(data: Vec<Self::Item>, links: PaginationLinks, meta: PaginationMeta) -> Self;

    /// The envelope of `page` around `data`.
    fn of(page: &Page, data: impl IntoIterator<Item = Self::Item>) -> Self {
        Self::from_parts(data.into_iter().collect(), links(page), meta(page))
    }
}

macro_rules! envelopes {
    ($($list:ident of $item:ident),+ $(,)?) => {$(
        impl Envelope for $list {
            type Item = $item;

            fn from_parts(data: Vec<$item>, links: PaginationLinks, meta: PaginationMeta) -> Self {
                Self { data, links, meta }
            }
        }
    )+};
}

envelopes! {
    MemberList of Member,
    MembershipPlanList of MembershipPlan,
    SubscriptionPlanList of SubscriptionPlan,
    ProductList of Product,
    FacilityList of Facility,
    PurchaseList of Purchase,
    AttendanceList of AttendanceEntry,
    MemberMembershipList of MemberMembership,
    WebhookDeliveryList of WebhookDelivery,
    EventList of Event,
}

/// The device API's lists: the same envelope, in that document's types.
macro_rules! device_envelopes {
    ($($list:ident of $item:ident),+ $(,)?) => {$(
        impl Envelope for openapi::device_api::$list {
            type Item = openapi::device_api::$item;

            fn from_parts(data: Vec<Self::Item>, links: PaginationLinks, meta: PaginationMeta) -> Self {
                Self { data, links: links.into(), meta: meta.into() }
            }
        }
    )+};
}

device_envelopes! {
    DeviceList of Device,
    OrderList of Order,
}

fn links(page: &Page) -> PaginationLinks {
    PaginationLinks {
        first: page.link(1),
        last: page.link(page.last_page()),
        prev: page.prev().map(|p| page.link(p)).into(),
        next: page.next().map(|p| page.link(p)).into(),
    }
}

fn meta(page: &Page) -> PaginationMeta {
    let (from, to) = page.range();
    PaginationMeta {
        current_page: page.page,
        last_page: page.last_page(),
        per_page: page.per_page,
        total: page.total,
        from: from.into(),
        to: to.into(),
        next_page: page.next().into(),
        as_of: page.as_of,
    }
}

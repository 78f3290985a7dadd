//! The Devices page: the front-desk devices of the gym and of its sandbox, online or not; users
//! with `settings.manage` rename, move or remove one.

use std::collections::HashMap;

use entity::device;
use poem::{
    Request, Response, handler,
    http::StatusCode,
    web::{Data, Path},
};
use serde::Deserialize;
use uuid::Uuid;

use super::{Button, Signed, SignedForm, html, pages, redirect, refused, sentence, signed};
use crate::{
    accounts::{self, AccountError},
    facilities,
    frontdesk::{
        devices::{self, DeviceChange, online},
        queues::{self, Queue},
    },
    records::now,
    state::AppState,
};

/// The Devices page: [`PER_PAGE`] devices a page (`?page=N`), in a fixed number of statements
/// whatever their number (the page, the facilities' names, two for each kind of device on it).
#[handler]
pub(super) async fn list(req: &Request, state: Data<&AppState>) -> Response {
    let s = match signed(&state, req).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let asked = req.uri().query().unwrap_or_default().split('&').find_map(|p| p.strip_prefix("page="));
    let asked = asked.and_then(|p| p.parse::<u64>().ok()).unwrap_or(1).max(1);
    let gathered = async {
        let (mut found, mut total) = devices::page_of(&state.db, &s.actor(), s.gym.id, asked, PER_PAGE).await?;
        let mut page = asked;
        // Past the last page (a device removed since the link was made): the last page.
        if found.is_empty() && total > 0 {
            page = total.div_ceil(PER_PAGE);
            (found, total) = devices::page_of(&state.db, &s.actor(), s.gym.id, page, PER_PAGE).await?;
        }
        let names = facility_names(&state, &s).await?;
        let queues = queues::of_many(&*state.db, &found).await?;
        let rows = found.iter().zip(queues).map(|(d, q)| row(d, &s, &names, q)).collect();
        Ok::<_, AccountError>((rows, page, total.div_ceil(PER_PAGE).max(1)))
    };
    match gathered.await {
        Ok((rows, page, pages)) => html(
            StatusCode::OK,
            pages::devices(&pages::DevicesView {
                gym_name: &s.gym.name,
                user_email: &s.user.email,
                csrf: &s.session.csrf_token,
                can_manage: s.can_manage(),
                device_access: s.gym.device_access,
                devices: rows,
                page,
                pages,
            }),
        ),
        Err(e) => refused(e),
    }
}

/// Devices on one page of the Devices page.
const PER_PAGE: u64 = 50;

/// The names of the facilities of the gym and of its sandbox.
async fn facility_names(state: &AppState, s: &Signed) -> Result<HashMap<Uuid, String>, AccountError> {
    let gyms = accounts::with_sandbox(&state.db, s.gym.id).await?;
    Ok(facilities::of_gyms(&state.db, &gyms).await?.into_iter().map(|f| (f.id, f.name)).collect())
}

fn row(d: &device::Model, s: &Signed, facilities: &HashMap<Uuid, String>, queue: Queue) -> pages::DeviceRow {
    let noun = devices::noun(Some(d.kind));
    let mut kind = noun.to_string();
    if let Some(first) = kind.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    pages::DeviceRow {
        id: d.id,
        name: d.name.clone(),
        kind,
        facility: facilities.get(&d.facility_id).cloned().unwrap_or_else(|| "—".into()),
        sandbox: d.gym_id != s.gym.id,
        online: online(d, now()),
        last_seen: d.last_seen_at.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string()),
        queue: match queue.waiting {
            0 => format!("No {} waiting", queue.what.1),
            1 => format!("1 {} waiting", queue.what.0),
            n => format!("{n} {} waiting", queue.what.1),
        },
        last_error: queue.last_error.map(|(reason, at)| format!("{reason} ({})", at.format("%Y-%m-%d %H:%M UTC"))),
    }
}

/// One device's page: its status, and for managers the forms to rename, move or remove it.
async fn render(state: &AppState, s: &Signed, id: Uuid, error: Option<String>, status: StatusCode) -> Response {
    let gathered = async {
        let d = devices::one_of(&state.db, &s.actor(), s.gym.id, id).await?;
        let names = facility_names(state, s).await?;
        // Open facilities only (an archived one takes no devices), and the one it is in.
        let choices = facilities::of_gyms(&state.db, &[d.gym_id])
            .await?
            .into_iter()
            .filter(|f| f.open_id.is_some() || f.id == d.facility_id)
            .map(|f| (f.id, f.name))
            .collect();
        let queue = queues::of(&*state.db, &d).await?;
        Ok::<_, AccountError>((row(&d, s, &names, queue), d.facility_id, choices))
    };
    match gathered.await {
        Ok((device, facility_id, facilities)) => html(
            status,
            pages::device(&pages::DeviceView {
                gym_name: &s.gym.name,
                user_email: &s.user.email,
                csrf: &s.session.csrf_token,
                can_manage: s.can_manage(),
                device,
                facility_id,
                facilities,
                error,
            }),
        ),
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn show(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>) -> Response {
    match signed(&state, req).await {
        Ok(s) => render(&state, &s, id, None, StatusCode::OK).await,
        Err(r) => r,
    }
}

#[derive(Deserialize)]
pub(super) struct DeviceForm {
    #[serde(default)]
    name: String,
    facility_id: Option<Uuid>,
}

/// Renames or moves a device; bad input shows the form again with the reason (422).
#[handler]
pub(super) async fn update(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, f): SignedForm<DeviceForm>,
) -> Response {
    let change = DeviceChange { name: Some(f.name), facility_id: f.facility_id };
    match devices::change(&state.db, &s.actor(), s.gym.id, id, change).await {
        Ok(_) => redirect("/settings/devices"),
        Err(AccountError::Invalid(reason)) => {
            render(&state, &s, id, Some(sentence(reason)), StatusCode::UNPROCESSABLE_ENTITY).await
        }
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn remove(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, _): SignedForm<Button>,
) -> Response {
    match devices::remove(&state.db, &s.actor(), s.gym.id, id).await {
        Ok(()) => redirect("/settings/devices"),
        Err(e) => refused(e),
    }
}

//! The Facilities page: the locations of the gym and of its sandbox; users with `settings.manage`
//! add, rename and archive them (moving an archived facility's members and devices elsewhere).

use poem::{
    Request, Response, handler,
    http::StatusCode,
    web::{Data, Path},
};
use serde::Deserialize;
use uuid::Uuid;

use super::{Signed, SignedForm, html, pages, redirect, refused, sentence, signed};
use crate::{
    accounts::{self, AccountError},
    facilities::{self, NewFacility},
    state::AppState,
};

/// A facility as the page shows it.
fn row(f: &entity::facility::Model, s: &Signed) -> pages::FacilityRow {
    pages::FacilityRow {
        id: f.id,
        name: f.name.clone(),
        timezone: f.timezone.clone().unwrap_or_else(|| format!("{} (the gym's)", s.gym.timezone)),
        address: f.address.clone(),
        sandbox: f.gym_id != s.gym.id,
        archived: f.archived_at.map(|t| t.format("%Y-%m-%d").to_string()),
    }
}

/// The list with the form to add one; `error` (with its status) when an addition was refused.
async fn render_list(state: &AppState, s: &Signed, error: Option<String>, status: StatusCode) -> Response {
    let gathered = async {
        let gyms = accounts::with_sandbox(&state.db, s.gym.id).await?;
        let all = facilities::of_gyms(&state.db, &gyms).await?;
        Ok::<_, AccountError>((all.iter().map(|f| row(f, s)).collect(), gyms.len() > 1))
    };
    match gathered.await {
        Ok((rows, has_sandbox)) => html(
            status,
            pages::facilities(&pages::FacilitiesView {
                gym_name: &s.gym.name,
                user_email: &s.user.email,
                csrf: &s.session.csrf_token,
                can_manage: s.can_manage(),
                has_sandbox,
                facilities: rows,
                error,
            }),
        ),
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn list(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(s) => render_list(&state, &s, None, StatusCode::OK).await,
        Err(r) => r,
    }
}

#[derive(Deserialize)]
pub(super) struct NewForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    timezone: String,
    #[serde(default)]
    environment: String,
}

/// Adds a facility; bad input shows the page again with the reason (422).
#[handler]
pub(super) async fn create(state: Data<&AppState>, SignedForm(s, f): SignedForm<NewForm>) -> Response {
    let made = async {
        let gym = accounts::facilities_gym(&state.db, &s.actor(), s.gym.id, f.environment == "sandbox").await?;
        let new = NewFacility { name: f.name, timezone: Some(f.timezone), address: Some(f.address), legacy_id: None };
        Ok::<_, AccountError>(facilities::create(&state.db, gym, new).await?)
    };
    match made.await {
        Ok(_) => redirect("/settings/facilities"),
        Err(AccountError::Invalid(reason)) => {
            render_list(&state, &s, Some(sentence(reason)), StatusCode::UNPROCESSABLE_ENTITY).await
        }
        Err(e) => refused(e),
    }
}

/// One facility's page: for managers the forms to rename and archive it.
async fn render(state: &AppState, s: &Signed, id: Uuid, error: Option<String>, status: StatusCode) -> Response {
    let gathered = async {
        let gyms = accounts::with_sandbox(&state.db, s.gym.id).await?;
        let f = facilities::find(&state.db, &gyms, id).await?;
        let others = facilities::of_gyms(&state.db, &[f.gym_id]).await?;
        let targets = others.into_iter().filter(|o| o.id != id && o.open_id.is_some()).map(|o| (o.id, o.name));
        Ok::<_, AccountError>((row(&f, s), targets.collect()))
    };
    match gathered.await {
        Ok((facility, move_to)) => html(
            status,
            pages::facility(&pages::FacilityView {
                gym_name: &s.gym.name,
                user_email: &s.user.email,
                csrf: &s.session.csrf_token,
                can_manage: s.can_manage(),
                facility,
                move_to,
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
pub(super) struct RenameForm {
    #[serde(default)]
    name: String,
}

#[handler]
pub(super) async fn rename(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, f): SignedForm<RenameForm>,
) -> Response {
    let renamed = async {
        let (_, found) = accounts::managed_facility(&state.db, &s.actor(), id).await?;
        Ok::<_, AccountError>(facilities::rename(&state.db, found, &f.name).await?)
    };
    finish(&state, &s, id, renamed.await.map(|_| ())).await
}

#[derive(Deserialize)]
pub(super) struct ArchiveForm {
    /// Where its members and devices go; empty when nobody is placed in it.
    #[serde(default)]
    move_to: String,
}

#[handler]
pub(super) async fn archive(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, f): SignedForm<ArchiveForm>,
) -> Response {
    let move_to = Uuid::parse_str(f.move_to.trim()).ok();
    let archived = accounts::archive_facility(&state.db, &*state.store, &s.actor(), s.gym.id, id, move_to).await;
    finish(&state, &s, id, archived.map(|_| ())).await
}

/// Back to the list when done; the facility's page with the reason (422) when refused.
async fn finish(state: &AppState, s: &Signed, id: Uuid, done: Result<(), AccountError>) -> Response {
    match done {
        Ok(()) => redirect("/settings/facilities"),
        Err(AccountError::Invalid(reason)) => {
            render(state, s, id, Some(sentence(reason)), StatusCode::UNPROCESSABLE_ENTITY).await
        }
        Err(e) => refused(e),
    }
}

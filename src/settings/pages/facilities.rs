//! The facilities pages: every facility of the gym, and one facility.

use maud::{Markup, html};
use uuid::Uuid;

use super::{VIEW_ONLY, layout};

/// A facility as the Facilities page lists it.
pub struct FacilityRow {
    pub id: Uuid,
    pub name: String,
    pub timezone: String,
    pub address: Option<String>,
    pub sandbox: bool,
    /// The day it was archived.
    pub archived: Option<String>,
}

pub struct FacilitiesView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub has_sandbox: bool,
    pub facilities: Vec<FacilityRow>,
    pub error: Option<String>,
}

/// One facility, with the open facilities its members and devices may move to.
pub struct FacilityView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub facility: FacilityRow,
    pub move_to: Vec<(Uuid, String)>,
    pub error: Option<String>,
}

fn environment(sandbox: bool) -> Markup {
    html! { @if sandbox { span.badge.test { "Sandbox" } } @else { span.badge.live { "Live" } } }
}

pub fn facilities(v: &FacilitiesView) -> String {
    layout(
        "Facilities",
        Some((v.gym_name, v.user_email, v.csrf)),
        "facilities",
        html! {
            h1 { "Facilities" }
            @if let Some(e) = &v.error { p.notice.error role="alert" { (e) } }
            @if !v.can_manage { p.notice role="status" { (VIEW_ONLY) } }
            section.card aria-labelledby="facilities-title" {
                h2 #facilities-title { "Locations" }
                p.muted { "Members, doors, kiosks and card terminals belong to a facility; a door lets in the members of its own. An archived facility keeps its history but takes no new members or devices." }
                div.table-wrap tabindex="0" role="region" aria-label="Facilities" {
                    table {
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Time zone" } th scope="col" { "Environment" } th scope="col" { "Status" } @if v.can_manage { th scope="col" { span.visually-hidden { "Actions" } } } } }
                        tbody {
                            @for f in &v.facilities {
                                tr {
                                    td { (f.name) @if let Some(a) = &f.address { br; span.small.muted { (a) } } }
                                    td { (f.timezone) }
                                    td { (environment(f.sandbox)) }
                                    td { @if let Some(day) = &f.archived { "Archived " (day) } @else { "Open" } }
                                    @if v.can_manage {
                                        td.actions { a.button href={ "/settings/facilities/" (f.id) } aria-label={ "Edit " (f.name) } { "Edit" } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if v.can_manage {
                section.card aria-labelledby="add-title" {
                    h2 #add-title { "Add a facility" }
                    form.stack method="post" action="/settings/facilities" {
                        input type="hidden" name="csrf" value=(v.csrf);
                        label for="facility-name" { "Name" }
                        input #facility-name type="text" name="name" maxlength="200" required;
                        label for="facility-address" { "Address (optional)" }
                        textarea #facility-address name="address" rows="2" maxlength="500" {}
                        label for="facility-timezone" { "Time zone (optional: the gym's)" }
                        input #facility-timezone type="text" name="timezone" placeholder="Europe/Berlin";
                        @if v.has_sandbox {
                            label for="facility-environment" { "Environment" }
                            select #facility-environment name="environment" {
                                option value="live" { "Live" }
                                option value="sandbox" { "Sandbox" }
                            }
                        }
                        button.primary type="submit" { "Add facility" }
                    }
                }
            }
        },
    )
}

pub fn facility(v: &FacilityView) -> String {
    let f = &v.facility;
    layout(
        "Facility",
        Some((v.gym_name, v.user_email, v.csrf)),
        "facilities",
        html! {
            p { a href="/settings/facilities" { "‹ All facilities" } }
            h1 { (f.name) }
            p { (f.timezone) " · " (environment(f.sandbox)) " · " @if let Some(day) = &f.archived { "Archived " (day) } @else { "Open" } }
            @if let Some(e) = &v.error { p.notice.error role="alert" { (e) } }
            @if !v.can_manage {
                p.notice role="status" { (VIEW_ONLY) }
            } @else {
                section.card aria-labelledby="rename-title" {
                    h2 #rename-title { "Rename" }
                    form.stack method="post" action={ "/settings/facilities/" (f.id) } {
                        input type="hidden" name="csrf" value=(v.csrf);
                        label for="facility-name" { "Name" }
                        input #facility-name type="text" name="name" value=(f.name) maxlength="200" required;
                        button.primary type="submit" { "Save" }
                    }
                }
                @if f.archived.is_none() {
                    section.card aria-labelledby="archive-title" {
                        h2 #archive-title { "Archive" }
                        p { "The facility keeps its history (visits, sales) but takes no new members or devices. Its members and devices move to the facility chosen here, in the same step." }
                        form.stack method="post" action={ "/settings/facilities/" (f.id) "/archive" } {
                            input type="hidden" name="csrf" value=(v.csrf);
                            label for="facility-move-to" { "Move its members and devices to" }
                            select #facility-move-to name="move_to" {
                                @for (id, name) in &v.move_to { option value=(id) { (name) } }
                            }
                            button.danger type="submit" { "Archive facility" }
                        }
                    }
                }
            }
        },
    )
}

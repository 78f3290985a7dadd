//! The devices pages: every device of the gym, and one device.

use maud::{Markup, html};
use uuid::Uuid;

use super::{VIEW_ONLY, layout};

/// A device as the Devices page lists it.
pub struct DeviceRow {
    pub id: Uuid,
    pub name: String,
    pub kind: String,
    pub facility: String,
    pub sandbox: bool,
    pub online: bool,
    pub last_seen: Option<String>,
    /// What waits for it (`3 payments waiting`), and its latest failure with when.
    pub queue: String,
    pub last_error: Option<String>,
}

pub struct DevicesView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub device_access: bool,
    pub devices: Vec<DeviceRow>,
    /// This page, from 1, and how many there are.
    pub page: u64,
    pub pages: u64,
}

/// One device, with the facilities it may move to.
pub struct DeviceView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub device: DeviceRow,
    pub facility_id: Uuid,
    pub facilities: Vec<(Uuid, String)>,
    pub error: Option<String>,
}

fn device_status(d: &DeviceRow) -> Markup {
    html! {
        @if d.online { span.status.delivered { "Online" } } @else { span.status.failed { "Offline" } }
        br;
        span.muted.small {
            @match &d.last_seen { Some(t) => { "Last seen " (t) } None => { "Never seen" } }
        }
    }
}

fn device_queue(d: &DeviceRow) -> Markup {
    html! {
        (d.queue)
        @if let Some(e) = &d.last_error { br; span.small { "Last error: " (e) } }
    }
}

pub fn devices(v: &DevicesView) -> String {
    layout(
        "Devices",
        Some((v.gym_name, v.user_email, v.csrf)),
        "devices",
        html! {
            h1 { "Devices" }
            @if !v.device_access {
                p.notice.warn role="status" {
                    strong { "Your plan does not include device features. " }
                    "The front-desk app's requests are refused (403) until the plan includes them."
                }
            }
            @if !v.can_manage { p.notice role="status" { (VIEW_ONLY) } }
            section.card aria-labelledby="devices-title" {
                h2 #devices-title { "Front-desk devices" }
                p.muted { "The front-desk app registers its doors, doorbells, kiosks, card terminals and fiscal printers with an API key of this gym; a device is online when it was heard from in the last 90 seconds." }
                @if v.devices.is_empty() {
                    p.muted { "No devices yet." }
                } @else {
                    div.table-wrap tabindex="0" role="region" aria-label="Devices" {
                        table {
                            thead { tr { th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Facility" } th scope="col" { "Environment" } th scope="col" { "Status" } th scope="col" { "Queue" } @if v.can_manage { th scope="col" { span.visually-hidden { "Actions" } } } } }
                            tbody {
                                @for d in &v.devices {
                                    tr {
                                        td { (d.name) }
                                        td { (d.kind) }
                                        td { (d.facility) }
                                        td { @if d.sandbox { span.badge.test { "Sandbox" } } @else { span.badge.live { "Live" } } }
                                        td { (device_status(d)) }
                                        td { (device_queue(d)) }
                                        @if v.can_manage {
                                            td.actions {
                                                a.button href={ "/settings/devices/" (d.id) } aria-label={ "Edit " (d.name) } { "Edit" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    @if v.pages > 1 {
                        nav.pager aria-label="Pages of devices" {
                            @if v.page > 1 { a href={ "/settings/devices?page=" (v.page - 1) } rel="prev" { "‹ Previous" } " " }
                            span { "Page " (v.page) " of " (v.pages) }
                            @if v.page < v.pages { " " a href={ "/settings/devices?page=" (v.page + 1) } rel="next" { "Next ›" } }
                        }
                    }
                }
            }
        },
    )
}

pub fn device(v: &DeviceView) -> String {
    let d = &v.device;
    layout(
        "Device",
        Some((v.gym_name, v.user_email, v.csrf)),
        "devices",
        html! {
            p { a href="/settings/devices" { "‹ All devices" } }
            h1 { (d.name) }
            p { (d.kind) " · " (d.facility) " · " (device_status(d)) }
            p { (device_queue(d)) }
            @if let Some(e) = &v.error { p.notice.error role="alert" { (e) } }
            @if v.can_manage {
                section.card aria-labelledby="edit-title" {
                    h2 #edit-title { "Rename or move" }
                    form.stack method="post" action={ "/settings/devices/" (d.id) } {
                        input type="hidden" name="csrf" value=(v.csrf);
                        label for="device-name" { "Name" }
                        input #device-name type="text" name="name" value=(d.name) maxlength="100" required;
                        label for="device-facility" { "Facility" }
                        select #device-facility name="facility_id" {
                            @for (id, name) in &v.facilities {
                                option value=(id) selected[*id == v.facility_id] { (name) }
                            }
                        }
                        button.primary type="submit" { "Save" }
                    }
                }
                section.card aria-labelledby="remove-title" {
                    h2 #remove-title { "Remove" }
                    p { "The device stops being known: its requests are answered 404 until the front-desk app registers it again. Its rings and door commands go with it; its door's attendance entries stay." }
                    form method="post" action={ "/settings/devices/" (d.id) "/remove" } {
                        input type="hidden" name="csrf" value=(v.csrf);
                        button.danger type="submit" { "Remove device" }
                    }
                }
            } @else {
                p.notice role="status" { (VIEW_ONLY) }
            }
        },
    )
}

//! The markup of the settings area. Everything here renders what a handler gathered; decisions
//! (who may act, what a status is called) are made before.

use std::collections::HashMap;

use chrono::NaiveDate;
use entity::{api_key, webhook_delivery, webhook_endpoint};
use maud::{DOCTYPE, Markup, html};
use uuid::Uuid;

pub const CSS: &str = include_str!("app.css");
pub const JS: &str = include_str!("app.js");

/// What to tell the user on top of the API integration page.
pub enum Flash {
    /// A key just created or rolled: shown once, never again.
    NewKey {
        name: String,
        key: String,
    },
    Error(String),
}

/// A webhook signing secret just created or rotated: shown once.
pub struct NewSecret {
    pub url: String,
    pub secret: String,
}

pub struct KeyRow {
    pub id: Uuid,
    pub name: String,
    pub environment: &'static str,
    pub prefix: String,
    pub last_used: Option<String>,
    pub status: String,
    pub can_roll: bool,
    pub can_revoke: bool,
}

/// Requests per day of one key.
pub struct KeyUsage {
    pub label: String,
    pub days: Vec<(NaiveDate, i64)>,
}

pub struct ApiView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub api_access: bool,
    pub sandbox_since: Option<String>,
    pub keys: Vec<KeyRow>,
    pub requests: Vec<KeyUsage>,
    pub flash: Option<Flash>,
}

pub struct WebhooksView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub gym_id: Uuid,
    pub endpoints: &'a [webhook_endpoint::Model],
    pub deliveries: &'a [webhook_delivery::Model],
    pub endpoint_urls: &'a HashMap<Uuid, String>,
    pub daily: &'a [(NaiveDate, i64, i64, i64)],
    pub secret: Option<NewSecret>,
    pub event_types: Vec<&'static str>,
}

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

#[derive(Clone, Copy)]
pub enum KeyAction {
    Roll,
    Revoke,
}

fn layout(title: &str, gym: Option<(&str, &str, &str)>, active: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · gymapi settings" }
                link rel="stylesheet" href="/settings/assets/app.css";
                script src="/settings/assets/app.js" defer {}
            }
            body {
                header.top {
                    div.brand { "gymapi" span.muted { " Settings" } }
                    @if let Some((gym, email, csrf)) = gym {
                        div.who {
                            span { (gym) } " · " span.muted { (email) }
                            form method="post" action="/settings/sign-out" {
                                input type="hidden" name="csrf" value=(csrf);
                                button.link type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                @if gym.is_some() {
                    nav aria-label="Settings" {
                        span.crumb { "Settings ›" }
                        a href="/settings/integrations/api" aria-current=[(active == "api").then_some("page")] { "API integration" }
                        a href="/settings/integrations/webhooks" aria-current=[(active == "webhooks").then_some("page")] { "Webhooks" }
                        a href="/settings/facilities" aria-current=[(active == "facilities").then_some("page")] { "Facilities" }
                        a href="/settings/devices" aria-current=[(active == "devices").then_some("page")] { "Devices" }
                    }
                }
                main { (body) }
            }
        }
    }
    .into_string()
}

pub fn error(status: u16, message: &str) -> String {
    layout(
        "Error",
        None,
        "",
        html! {
            h1 { "Something is not right" }
            p.notice.error role="alert" { (message) }
            p { a href="/settings" { "Back to the settings" } " (" (status) ")" }
        },
    )
}

pub fn sign_in(csrf: &str, message: Option<&str>) -> String {
    layout(
        "Sign in",
        None,
        "",
        html! {
            section.card.narrow {
                h1 { "Sign in" }
                p.muted { "Manage your gym's API keys, sandbox and webhooks." }
                @if let Some(m) = message { p.notice.error role="alert" { (m) } }
                form method="post" action="/settings/sign-in" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="email" { "Email" }
                    input #email type="email" name="email" autocomplete="username" required;
                    label for="password" { "Password" }
                    input #password type="password" name="password" autocomplete="current-password" required;
                    button.primary type="submit" { "Sign in" }
                }
            }
        },
    )
}

pub fn api(v: &ApiView) -> String {
    layout(
        "API integration",
        Some((v.gym_name, v.user_email, v.csrf)),
        "api",
        html! {
            h1 { "API integration" }
            @if !v.api_access {
                p.notice.warn role="status" {
                    strong { "Your plan does not include API access. " }
                    "Keys cannot be created, and existing keys are refused (403). Upgrade the plan to use the API."
                }
            }
            @if !v.can_manage {
                p.notice role="status" { "You can view these settings. To change them you need the settings.manage permission; ask the gym's owner." }
            }
            @match &v.flash {
                Some(Flash::NewKey { name, key }) => {
                    section.notice.success aria-labelledby="new-key-title" {
                        h2 #new-key-title { "Your new key “" (name) "”" }
                        p { strong { "Copy it now: it is shown only once." } " Store it like a password." }
                        div.copy {
                            input #new-key type="text" readonly value=(key) aria-label="The new API key";
                            button.primary type="button" data-copy="new-key" { "Copy" }
                        }
                        p.muted.small #copy-status role="status" aria-live="polite" {}
                    }
                }
                Some(Flash::Error(m)) => { p.notice.error role="alert" { (m) } }
                None => {}
            }
            section.card aria-labelledby="keys-title" {
                h2 #keys-title { "API keys" }
                @if v.keys.is_empty() {
                    p.muted { "No keys yet." }
                } @else {
                    div.table-wrap tabindex="0" role="region" aria-label="API keys" {
                        table {
                            thead { tr { th scope="col" { "Name" } th scope="col" { "Environment" } th scope="col" { "Key" } th scope="col" { "Last used" } th scope="col" { "Status" } @if v.can_manage { th scope="col" { span.visually-hidden { "Actions" } } } } }
                            tbody {
                                @for k in &v.keys {
                                    tr {
                                        td { (k.name) }
                                        td { span.badge.(k.environment.to_lowercase()) { (k.environment) } }
                                        td { code { (k.prefix) "…" } }
                                        td { (k.last_used.as_deref().unwrap_or("Never")) }
                                        td { (k.status) }
                                        @if v.can_manage {
                                            td.actions {
                                                @if k.can_roll { a.button href={ "/settings/integrations/api/keys/" (k.id) "/roll" } { "Roll" } }
                                                @if k.can_revoke { a.button.danger href={ "/settings/integrations/api/keys/" (k.id) "/revoke" } { "Revoke" } }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            section.card aria-labelledby="usage-title" {
                h2 #usage-title { "API requests per day" }
                @if v.requests.is_empty() {
                    p.muted { "No requests in the last 14 days." }
                } @else {
                    @for (i, k) in v.requests.iter().enumerate() {
                        (usage_chart(i, k))
                    }
                }
            }
            @if v.can_manage && v.api_access {
                section.card aria-labelledby="create-title" {
                    h2 #create-title { "Create key" }
                    form.inline method="post" action="/settings/integrations/api/keys" {
                        input type="hidden" name="csrf" value=(v.csrf);
                        div { label for="key-name" { "Name" } input #key-name type="text" name="name" maxlength="100" required placeholder="Front desk app"; }
                        div {
                            label for="key-env" { "Environment" }
                            select #key-env name="environment" {
                                option value="live" { "Live" }
                                option value="test" { "Test (sandbox)" }
                            }
                        }
                        button.primary type="submit" { "Create key" }
                    }
                }
            }
            section.card aria-labelledby="sandbox-title" {
                h2 #sandbox-title { "Sandbox" }
                @match &v.sandbox_since {
                    Some(since) => p { "Provisioned on " (since) ". Test keys (svc_test_…) see only the sandbox's data." }
                    None => {
                        p { "A sandbox is a separate copy of your gym for testing: test keys work only there." }
                        @if v.can_manage {
                            form method="post" action="/settings/integrations/api/sandbox" {
                                input type="hidden" name="csrf" value=(v.csrf);
                                button.primary type="submit" { "Provision sandbox" }
                            }
                        }
                    }
                }
            }
        },
    )
}

pub fn confirm_key(
    gym: &str,
    email: &str,
    csrf: &str,
    key: &api_key::Model,
    action: KeyAction,
    can_manage: bool,
) -> String {
    let (title, verb, text, class) = match action {
        KeyAction::Roll => (
            "Roll key",
            "roll",
            "A new key replaces this one. The old key keeps working for its grace period, so you can deploy the new one; then it stops.",
            "primary",
        ),
        KeyAction::Revoke => {
            ("Revoke key", "revoke", "The key stops working at once, on every server. This cannot be undone.", "danger")
        }
    };
    layout(
        title,
        Some((gym, email, csrf)),
        "api",
        html! {
            section.card.narrow {
                h1 { (title) " “" (key.name) "”" }
                p { code { (key.prefix) "…" } }
                p { (text) }
                @if can_manage {
                    form method="post" action={ "/settings/integrations/api/keys/" (key.id) "/" (verb) } {
                        input type="hidden" name="csrf" value=(csrf);
                        button.(class) type="submit" { (title) }
                        " "
                        a href="/settings/integrations/api" { "Cancel" }
                    }
                } @else {
                    p.notice { "You need the settings.manage permission to do this." }
                }
            }
        },
    )
}

/// Deliveries per day as stacked bars (delivered, pending, failed), with a table for screen readers.
fn chart(daily: &[(NaiveDate, i64, i64, i64)]) -> Markup {
    let max = daily.iter().map(|(_, d, p, f)| d + p + f).max().unwrap_or(0).max(1);
    let (w, h, bar) = (28 * daily.len().max(1), 120.0_f64, 20);
    let scale = |n: i64| (n as f64 / max as f64) * (h - 20.0);
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (w) " " (h) } role="img" aria-labelledby="chart-title" preserveAspectRatio="none" {
                title #chart-title { "Webhook deliveries per day over the last " (daily.len()) " days" }
                @for (i, (day, delivered, pending, failed)) in daily.iter().enumerate() {
                    @let x = i * 28 + 4;
                    @let hd = scale(*delivered);
                    @let hp = scale(*pending);
                    @let hf = scale(*failed);
                    g {
                        title { (day) ": " (delivered) " delivered, " (pending) " pending, " (failed) " failed" }
                        rect.delivered x=(x) y=(format!("{:.1}", h - 16.0 - hd)) width=(bar) height=(format!("{hd:.1}")) {}
                        rect.pending x=(x) y=(format!("{:.1}", h - 16.0 - hd - hp)) width=(bar) height=(format!("{hp:.1}")) {}
                        rect.failed x=(x) y=(format!("{:.1}", h - 16.0 - hd - hp - hf)) width=(bar) height=(format!("{hf:.1}")) {}
                        text x=(x + bar / 2) y=(h - 3.0) text-anchor="middle" { (day.format("%d")) }
                    }
                }
            }
            figcaption {
                span.key.delivered { "Delivered" } " " span.key.pending { "Pending" } " " span.key.failed { "Failed" }
            }
            details {
                summary { "As a table" }
                table {
                    thead { tr { th scope="col" { "Day" } th scope="col" { "Delivered" } th scope="col" { "Pending" } th scope="col" { "Failed" } } }
                    tbody { @for (day, d, p, f) in daily { tr { td { (day) } td { (d) } td { (p) } td { (f) } } } }
                }
            }
        }
    }
}

pub fn webhooks(v: &WebhooksView) -> String {
    layout(
        "Webhooks",
        Some((v.gym_name, v.user_email, v.csrf)),
        "webhooks",
        html! {
            h1 { "Webhooks" }
            @if !v.can_manage {
                p.notice role="status" { "You can view these settings. To change them you need the settings.manage permission; ask the gym's owner." }
            }
            @if let Some(s) = &v.secret {
                section.notice.success aria-labelledby="secret-title" {
                    h2 #secret-title { "Signing secret for " (s.url) }
                    p { strong { "Copy it now: it is shown only once." } " Verify each delivery's webhook-signature with it." }
                    div.copy {
                        input #new-secret type="text" readonly value=(s.secret) aria-label="The signing secret";
                        button.primary type="button" data-copy="new-secret" { "Copy" }
                    }
                    p.muted.small #copy-status role="status" aria-live="polite" {}
                }
            }
            section.card aria-labelledby="endpoints-title" {
                h2 #endpoints-title { "Endpoints" }
                @if v.endpoints.is_empty() {
                    p.muted { "No endpoints yet." }
                } @else {
                    div.table-wrap tabindex="0" role="region" aria-label="Webhook endpoints" {
                        table {
                            thead { tr { th scope="col" { "URL" } th scope="col" { "Environment" } th scope="col" { "Events" } th scope="col" { "State" } @if v.can_manage { th scope="col" { span.visually-hidden { "Actions" } } } } }
                            tbody {
                                @for e in v.endpoints {
                                    tr {
                                        td { code.url { (e.url) } }
                                        td { @if e.gym_id == v.gym_id { span.badge.live { "Live" } } @else { span.badge.test { "Sandbox" } } }
                                        td { (e.event_types.as_deref().map(|t| t.replace(',', ", ")).unwrap_or_else(|| "All events".into())) }
                                        td {
                                            @if e.enabled { "Enabled" } @else { "Disabled" }
                                            @if let Some(r) = &e.disabled_reason { @if !e.enabled { br; span.muted.small { (r) } } }
                                        }
                                        @if v.can_manage {
                                            td.actions {
                                                @for (action, label, class) in endpoint_actions(e.enabled) {
                                                    form method="post" action={ "/settings/integrations/webhooks/endpoints/" (e.id) "/" (action) } {
                                                        input type="hidden" name="csrf" value=(v.csrf);
                                                        button.(class) type="submit" aria-label={ (label) " " (e.url) } { (label) }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if v.can_manage {
                    h3 { "Add endpoint" }
                    form.stack method="post" action="/settings/integrations/webhooks/endpoints" {
                        input type="hidden" name="csrf" value=(v.csrf);
                        label for="hook-url" { "URL (https)" }
                        input #hook-url type="url" name="url" required placeholder="https://example.com/webhooks/gymapi";
                        label for="hook-env" { "Environment" }
                        select #hook-env name="environment" { option value="live" { "Live" } option value="test" { "Sandbox" } }
                        fieldset {
                            legend { "Events (none checked: all)" }
                            @for t in &v.event_types {
                                label.check { input type="checkbox" name="events" value=(t); " " (t) }
                            }
                        }
                        button.primary type="submit" { "Add endpoint" }
                    }
                }
            }
            section.card aria-labelledby="chart-heading" {
                h2 #chart-heading { "Deliveries per day" }
                (chart(v.daily))
            }
            section.card aria-labelledby="deliveries-title" {
                h2 #deliveries-title { "Recent deliveries" }
                @if v.deliveries.is_empty() {
                    p.muted { "No deliveries yet." }
                } @else {
                    div.table-wrap tabindex="0" role="region" aria-label="Recent deliveries" {
                        table {
                            thead { tr { th scope="col" { "Created" } th scope="col" { "Event" } th scope="col" { "Endpoint" } th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "Last answer" } @if v.can_manage { th scope="col" { span.visually-hidden { "Actions" } } } } }
                            tbody {
                                @for d in v.deliveries {
                                    @let attempts = attempts_of(d);
                                    tr {
                                        td { (d.created_at.format("%Y-%m-%d %H:%M:%S")) }
                                        td { code { (d.event_type) } }
                                        td { code.url { (v.endpoint_urls.get(&d.endpoint_id).map(String::as_str).unwrap_or("(deleted)")) } }
                                        td { span.status.(d.status.as_str()) { (d.status) } }
                                        td { (d.attempt_count) }
                                        td.small { (attempts) }
                                        @if v.can_manage {
                                            td.actions {
                                                form method="post" action={ "/settings/integrations/webhooks/deliveries/" (d.id) "/redeliver" } {
                                                    input type="hidden" name="csrf" value=(v.csrf);
                                                    button type="submit" { "Redeliver" }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// One key's requests per day as bars, with its total and a table for screen readers.
fn usage_chart(i: usize, k: &KeyUsage) -> Markup {
    let max = k.days.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let total: i64 = k.days.iter().map(|(_, n)| n).sum();
    let (w, h) = (28 * k.days.len().max(1), 60.0_f64);
    let id = format!("usage-{i}");
    html! {
        figure.chart.usage {
            figcaption { strong { (k.label) } " · " (total) @if total == 1 { " request" } @else { " requests" } }
            svg viewBox={ "0 0 " (w) " " (h) } role="img" aria-labelledby=(id) preserveAspectRatio="none" {
                title #(id) { "Requests per day of " (k.label) }
                @for (j, (day, n)) in k.days.iter().enumerate() {
                    @let bar = (*n as f64 / max as f64) * (h - 4.0);
                    rect.delivered x=(j * 28 + 4) y=(format!("{:.1}", h - bar)) width="20" height=(format!("{bar:.1}")) {
                        title { (day) ": " (n) }
                    }
                }
            }
            details {
                summary { "As a table" }
                table {
                    thead { tr { th scope="col" { "Day" } th scope="col" { "Requests" } } }
                    tbody { @for (day, n) in &k.days { tr { td { (day) } td { (n) } } } }
                }
            }
        }
    }
}

fn endpoint_actions(enabled: bool) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut a = vec![("ping", "Send ping", "plain")];
    a.push(if enabled { ("disable", "Disable", "plain") } else { ("enable", "Enable", "plain") });
    a.push(("rotate", "Rotate secret", "plain"));
    a.push(("delete", "Delete", "danger"));
    a
}

/// The last attempt in words: `200 · 84 ms` or the error.
fn attempts_of(d: &webhook_delivery::Model) -> String {
    let list: Vec<serde_json::Value> = serde_json::from_str(&d.attempts).unwrap_or_default();
    match list.last() {
        None => "Not tried yet".into(),
        Some(a) => match (a["response_status"].as_i64(), a["error"].as_str()) {
            (Some(s), _) => format!("HTTP {s} · {} ms", a["duration_ms"].as_i64().unwrap_or(0)),
            (None, Some(e)) => e.to_string(),
            _ => "—".into(),
        },
    }
}

const VIEW_ONLY: &str =
    "You can view these settings. To change them you need the settings.manage permission; ask the gym's owner.";

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

//! The API integration page: keys with their use per day, the sandbox, and the confirmation of a
//! key's roll or revocation.

use chrono::NaiveDate;
use entity::api_key;
use maud::{Markup, html};
use uuid::Uuid;

use super::{Flash, layout};

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

#[derive(Clone, Copy)]
pub enum KeyAction {
    Roll,
    Revoke,
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
                    Some(since) => {
                        p { "Provisioned on " (since) ". Test keys (svc_test_…) see only the sandbox's data." }
                        @if v.can_manage {
                            p { "Emptying it removes every record (members, plans, check-ins, sales, webhook events and \
                                 deliveries, idempotency keys) and keeps its keys, webhook endpoints, facilities and \
                                 devices; resetting it to the fixtures then writes the records the API's examples show." }
                            form method="post" action="/settings/integrations/api/sandbox/reset" {
                                input type="hidden" name="csrf" value=(v.csrf);
                                button type="submit" { "Empty sandbox" }
                            }
                            form method="post" action="/settings/integrations/api/sandbox/fixtures" {
                                input type="hidden" name="csrf" value=(v.csrf);
                                button type="submit" { "Reset sandbox to the fixtures" }
                            }
                        }
                    }
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

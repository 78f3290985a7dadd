//! The webhooks page: endpoints with their actions, the deliveries per day, recent deliveries.

use std::collections::HashMap;

use chrono::NaiveDate;
use entity::ids::GymId;
use entity::{webhook_delivery, webhook_endpoint};
use maud::{Markup, html};
use uuid::Uuid;

use super::layout;

/// A webhook signing secret just created or rotated: shown once.
pub struct NewSecret {
    pub url: String,
    pub secret: String,
}

pub struct WebhooksView<'a> {
    pub gym_name: &'a str,
    pub user_email: &'a str,
    pub csrf: &'a str,
    pub can_manage: bool,
    pub gym_id: GymId,
    pub endpoints: &'a [webhook_endpoint::Model],
    pub deliveries: &'a [webhook_delivery::Model],
    pub endpoint_urls: &'a HashMap<Uuid, String>,
    pub daily: &'a [(NaiveDate, i64, i64, i64)],
    pub secret: Option<NewSecret>,
    pub event_types: Vec<&'static str>,
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

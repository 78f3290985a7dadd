//! The markup of the settings area. Everything here renders what a handler gathered; decisions
//! (who may act, what a status is called) are made before.

mod devices;
mod facilities;
mod keys;
mod webhooks;

use maud::{DOCTYPE, Markup, html};

pub use devices::{DeviceRow, DeviceView, DevicesView, device, devices};
pub use facilities::{FacilitiesView, FacilityRow, FacilityView, facilities, facility};
pub use keys::{ApiView, KeyAction, KeyRow, KeyUsage, api, confirm_key};
pub use webhooks::{NewSecret, WebhooksView, webhooks};

pub const CSS: &str = include_str!("../app.css");
pub const JS: &str = include_str!("../app.js");

/// What to tell the user on top of the API integration page.
pub enum Flash {
    /// A key just created or rolled: shown once, never again.
    NewKey {
        name: String,
        key: String,
    },
    Error(String),
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

const VIEW_ONLY: &str =
    "You can view these settings. To change them you need the settings.manage permission; ask the gym's owner.";

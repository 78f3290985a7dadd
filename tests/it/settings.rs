//! The settings area over HTTP as a browser uses it: cookies, forms, redirects.

use entity::states::Role;
use gymapi::{
    accounts::{self, Permission},
    context::Environment,
};
use reqwest::redirect::Policy;
use serde_json::json;

use crate::common::{Gym, TestApp};

const PASSWORD: &str = "a long password";

/// A browser: a cookie jar, no automatic redirects.
struct Browser {
    client: reqwest::Client,
    base: String,
    jar: std::sync::Arc<reqwest::cookie::Jar>,
}

struct Page {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Page {
    fn csrf(&self) -> String {
        let at = self.body.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + 19;
        self.body[at..].split('"').next().unwrap().to_string()
    }
    /// The first `svc_..._...` key on the page.
    fn key(&self) -> Option<String> {
        let at = self.body.find("value=\"svc_")? + 7;
        Some(self.body[at..].split('"').next().unwrap().to_string())
    }
}

impl Browser {
    fn new(app: &TestApp) -> Self {
        Self::built(app, |b| b)
    }

    /// A browser whose connections come from `ip` (any 127.x.x.x reaches the server).
    fn from_address(app: &TestApp, ip: &str) -> Self {
        Self::built(app, |b| b.local_address(ip.parse::<std::net::IpAddr>().unwrap()))
    }

    fn built(app: &TestApp, more: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder) -> Self {
        let jar = std::sync::Arc::new(reqwest::cookie::Jar::default());
        let builder = reqwest::Client::builder().cookie_provider(jar.clone()).redirect(Policy::none());
        Self { client: more(builder).build().unwrap(), base: app.address.clone(), jar }
    }

    /// The value of the cookie `name` the server set, if it did.
    fn cookie(&self, name: &str) -> Option<String> {
        use reqwest::cookie::CookieStore;
        let all = self.jar.cookies(&format!("{}/settings/", self.base).parse().unwrap())?;
        let all = all.to_str().unwrap().to_string();
        all.split("; ").find_map(|c| c.strip_prefix(&format!("{name}=")).map(str::to_string))
    }

    async fn page(resp: reqwest::Response) -> Page {
        let status = resp.status().as_u16();
        let location = resp.headers().get("location").map(|v| v.to_str().unwrap().to_string());
        Page { status, location, body: resp.text().await.unwrap() }
    }

    async fn get(&self, path: &str) -> Page {
        Self::page(self.client.get(format!("{}{path}", self.base)).send().await.unwrap()).await
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        Self::page(self.client.post(format!("{}{path}", self.base)).form(form).send().await.unwrap()).await
    }

    async fn sign_in(&self, email: &str, password: &str) -> Page {
        let form = self.get("/settings/sign-in").await;
        assert_eq!(form.status, 200);
        self.post("/settings/sign-in", &[("email", email), ("password", password), ("csrf", &form.csrf())]).await
    }
}

async fn user(app: &TestApp, gym: &Gym, email: &str, role: &str, grants: &[Permission]) {
    accounts::create_user(&app.db, gym.id, email, Role::parse(role).unwrap(), grants, PASSWORD).await.unwrap();
}

async fn signed_in(app: &TestApp, gym: &Gym, email: &str, role: &str, grants: &[Permission]) -> Browser {
    user(app, gym, email, role, grants).await;
    let b = Browser::new(app);
    let r = b.sign_in(email, PASSWORD).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location.as_deref(), Some("/settings/integrations/api"));
    b
}

#[tokio::test]
async fn an_owner_creates_uses_rolls_and_revokes_a_key() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Iron Temple").await;
    let b = signed_in(&app, &gym, "owner@iron.example", "owner", &[]).await;

    let page = b.get("/settings/integrations/api").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Iron Temple"));
    let created = b
        .post(
            "/settings/integrations/api/keys",
            &[("csrf", &page.csrf()), ("name", "Front desk"), ("environment", "live")],
        )
        .await;
    assert_eq!(created.status, 200);
    let key = created.key().expect("the new key, shown once");
    assert!(key.starts_with("svc_live_"));
    assert!(created.body.contains("shown only once"));
    // It works against the API, and the page never shows it again.
    assert_eq!(app.get(&key, "/members").await.status, 200);
    for _ in 0..4 {
        assert_eq!(app.get(&key, "/members").await.status, 200);
    }
    let again = b.get("/settings/integrations/api").await;
    assert!(!again.body.contains(&key[12..]), "the full key is never shown again");
    assert!(again.body.contains(&key[..13]), "its prefix is");
    // The chart counts the key's requests of today (five so far).
    assert!(again.body.contains(&format!("Front desk ({}…)</strong> · 5 requests", &key[..13])), "{}", again.body);

    // Roll: a confirmation page, then a new key; the old one retires.
    let id = accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id)
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.name == "Front desk")
        .unwrap()
        .id;
    let confirm = b.get(&format!("/settings/integrations/api/keys/{id}/roll")).await;
    assert_eq!(confirm.status, 200);
    assert!(confirm.body.contains("Roll key"));
    let rolled = b.post(&format!("/settings/integrations/api/keys/{id}/roll"), &[("csrf", &confirm.csrf())]).await;
    assert_eq!(rolled.status, 200);
    let new_key = rolled.key().unwrap();
    assert_ne!(new_key, key);
    assert!(rolled.body.contains("Retires in"), "the old key shows its grace");
    assert!(
        !rolled.body.contains(&format!("/settings/integrations/api/keys/{id}/roll")),
        "a retiring key cannot be rolled"
    );
    assert_eq!(app.get(&key, "/members").await.status, 200, "the old key works during its grace");

    // Revoke the new one: the API refuses it at once.
    let new_id = accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id)
        .await
        .unwrap()
        .into_iter()
        .find(|k| new_key.starts_with(&k.prefix) && k.revoked_at.is_none() && k.expires_at.is_none())
        .unwrap()
        .id;
    let revoked =
        b.post(&format!("/settings/integrations/api/keys/{new_id}/revoke"), &[("csrf", &rolled.csrf())]).await;
    assert_eq!(revoked.status, 303);
    assert_eq!(app.get(&new_key, "/members").await.status, 401);
    assert!(b.get("/settings/integrations/api").await.body.contains("Revoked"));
}

#[tokio::test]
async fn a_test_key_needs_the_sandbox_first() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Sandbox gym").await;
    let b = signed_in(&app, &gym, "owner@sandbox.example", "owner", &[]).await;
    let page = b.get("/settings/integrations/api").await;
    let refused = b
        .post("/settings/integrations/api/keys", &[("csrf", &page.csrf()), ("name", "CI"), ("environment", "test")])
        .await;
    assert_eq!(refused.status, 422);
    assert!(refused.body.contains("Provision a sandbox first to create a test key."));
    assert!(refused.key().is_none());
    let provisioned = b.post("/settings/integrations/api/sandbox", &[("csrf", &page.csrf())]).await;
    assert_eq!(provisioned.status, 303);
    let page = b.get("/settings/integrations/api").await;
    assert!(page.body.contains("Provisioned on"));
    assert!(!page.body.contains("Provision sandbox"), "once");
    let created = b
        .post("/settings/integrations/api/keys", &[("csrf", &page.csrf()), ("name", "CI"), ("environment", "test")])
        .await;
    let key = created.key().unwrap();
    assert!(key.starts_with("svc_test_"));
    assert_eq!(app.get(&key, "/members").await.status, 200);
    // Emptied from the page: the sandbox's members go, its key stays.
    app.member(&key, "Ada", "Lovelace").await;
    let page = b.get("/settings/integrations/api").await;
    assert!(page.body.contains("Empty sandbox"));
    let emptied = b.post("/settings/integrations/api/sandbox/reset", &[("csrf", &page.csrf())]).await;
    assert_eq!(emptied.status, 303);
    assert_eq!(app.get(&key, "/members").await.body["meta"]["total"], 0);
    // Reset to the fixtures from the page: the example member is there.
    let page = b.get("/settings/integrations/api").await;
    let filled = b.post("/settings/integrations/api/sandbox/fixtures", &[("csrf", &page.csrf())]).await;
    assert_eq!(filled.status, 303);
    assert_eq!(app.get(&key, "/members").await.body["data"][0]["email"], "ada@example.com");
}

#[tokio::test]
async fn an_employee_without_the_permission_sees_but_cannot_act() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Staffed").await;
    let b = signed_in(&app, &gym, "desk@staffed.example", "employee", &[]).await;
    let page = b.get("/settings/integrations/api").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("settings.manage"));
    assert!(!page.body.contains("Create key"));
    assert!(!page.body.contains("Provision sandbox"));
    let direct = b
        .post("/settings/integrations/api/keys", &[("csrf", &page.csrf()), ("name", "Sneaky"), ("environment", "live")])
        .await;
    assert_eq!(direct.status, 403);
    let sandbox = b.post("/settings/integrations/api/sandbox", &[("csrf", &page.csrf())]).await;
    assert_eq!(sandbox.status, 403);
    let emptied = b.post("/settings/integrations/api/sandbox/reset", &[("csrf", &page.csrf())]).await;
    assert_eq!(emptied.status, 403);
    let filled = b.post("/settings/integrations/api/sandbox/fixtures", &[("csrf", &page.csrf())]).await;
    assert_eq!(filled.status, 403);
    let keys = accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap();
    assert!(keys.iter().all(|k| k.name != "Sneaky"));
    assert!(accounts::sandbox_of(&app.db, gym.id).await.unwrap().is_none());
    let hooks = b.get("/settings/integrations/webhooks").await;
    assert_eq!(hooks.status, 200);
    assert!(!hooks.body.contains("Add endpoint"));

    // With the permission granted, the same employee can.
    let granted = signed_in(&app, &gym, "lead@staffed.example", "employee", &[Permission::SettingsManage]).await;
    let page = granted.get("/settings/integrations/api").await;
    assert!(page.body.contains("Create key"));
}

/// Every action of the settings area: refused with 403 and its page without the session's CSRF
/// token, sent to sign in without a session, and a body that is not a form is a 415 page; none of
/// them reaches its record (the ids name nothing).
#[tokio::test]
async fn every_settings_action_checks_the_session_and_its_token_first() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Guarded").await;
    let owner = signed_in(&app, &gym, "owner@guarded.example", "owner", &[]).await;
    let stranger = Browser::new(&app);
    let id = "0190e5a4-0000-7000-8000-000000000000";
    let keys = || accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id);
    let before = keys().await.unwrap().len();
    let actions = [
        "/sign-out".to_string(),
        "/integrations/api/keys".to_string(),
        format!("/integrations/api/keys/{id}/roll"),
        format!("/integrations/api/keys/{id}/revoke"),
        "/integrations/api/sandbox".to_string(),
        "/integrations/api/sandbox/reset".to_string(),
        "/integrations/api/sandbox/fixtures".to_string(),
        "/integrations/webhooks/endpoints".to_string(),
        format!("/integrations/webhooks/endpoints/{id}/disable"),
        format!("/integrations/webhooks/deliveries/{id}/redeliver"),
        "/facilities".to_string(),
        format!("/facilities/{id}"),
        format!("/facilities/{id}/archive"),
        format!("/devices/{id}"),
        format!("/devices/{id}/remove"),
    ];
    for path in &actions {
        let path = format!("/settings{path}");
        let fields = [("name", "x"), ("environment", "live")];
        let forged = owner.post(&path, &[&fields[..], &[("csrf", "forged")]].concat()).await;
        assert_eq!(forged.status, 403, "{path}: {}", forged.body);
        assert!(forged.body.contains("did not come from this site"), "{path}: {}", forged.body);
        let anonymous = stranger.post(&path, &fields).await;
        assert_eq!((anonymous.status, anonymous.location.as_deref()), (303, Some("/settings/sign-in")), "{path}");
        let resp = owner.client.post(format!("{}{path}", owner.base)).body("{}").send().await.unwrap();
        let not_a_form = Browser::page(resp).await;
        assert_eq!(not_a_form.status, 415, "{path}: {}", not_a_form.body);
        assert!(not_a_form.body.contains("could not be read"), "{path}: {}", not_a_form.body);
    }
    // Still signed in (sign-out was refused too), and nothing was made.
    assert_eq!(owner.get("/settings/integrations/api").await.status, 200);
    assert_eq!(keys().await.unwrap().len(), before);
}

#[tokio::test]
async fn forms_without_the_csrf_token_are_refused() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Csrf").await;
    let b = signed_in(&app, &gym, "owner@csrf.example", "owner", &[]).await;
    let before = accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap().len();
    for form in [
        vec![("name", "Forged"), ("environment", "live")],
        vec![("csrf", "0000"), ("name", "Forged"), ("environment", "live")],
    ] {
        let r = b.post("/settings/integrations/api/keys", &form).await;
        assert_eq!(r.status, 403, "{}", r.body);
    }
    let r = b.post("/settings/integrations/api/sandbox", &[("csrf", "nope")]).await;
    assert_eq!(r.status, 403);
    assert_eq!(accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap().len(), before);
    // The sign-in form has its own token too.
    let fresh = Browser::new(&app);
    let r = fresh
        .post("/settings/sign-in", &[("email", "owner@csrf.example"), ("password", PASSWORD), ("csrf", "x")])
        .await;
    assert_eq!(r.status, 403);
    // A cookie and token pair chosen by the sender (login CSRF: signing the victim in as the
    // attacker) is refused; only a pair the server issued is taken.
    let chosen = "a".repeat(64);
    let forged = app
        .client
        .post(format!("{}/settings/sign-in", app.address))
        .header("cookie", format!("gymapi_signin={chosen}"))
        .form(&[("email", "owner@csrf.example"), ("password", PASSWORD), ("csrf", chosen.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(fresh.sign_in("owner@csrf.example", PASSWORD).await.status, 303);
}

#[tokio::test]
async fn sign_in_is_checked_throttled_and_ends_with_sign_out() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Doors").await;
    user(&app, &gym, "owner@doors.example", "owner", &[]).await;
    let b = Browser::new(&app);
    assert_eq!(b.get("/settings/integrations/api").await.location.as_deref(), Some("/settings/sign-in"));
    let missing = b.get("/settings/nowhere").await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("There is no such page."), "an HTML page, not the API's JSON: {}", missing.body);
    let wrong = b.sign_in("owner@doors.example", "not the password").await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("The email or the password is wrong."));
    let unknown = b.sign_in("nobody@doors.example", PASSWORD).await;
    assert_eq!(unknown.status, 401);

    let ok = b.sign_in("owner@doors.example", PASSWORD).await;
    assert_eq!(ok.status, 303);
    let page = b.get("/settings/integrations/api").await;
    assert_eq!(page.status, 200);
    let out = b.post("/settings/sign-out", &[("csrf", &page.csrf())]).await;
    assert_eq!(out.status, 303);
    assert_eq!(b.get("/settings/integrations/api").await.location.as_deref(), Some("/settings/sign-in"));

    // Five failures from one device, then each next attempt waits, even with the right password.
    for _ in 0..5 {
        assert_eq!(b.sign_in("owner@doors.example", "guess").await.status, 401);
    }
    let locked = b.sign_in("owner@doors.example", PASSWORD).await;
    assert_eq!(locked.status, 429, "{}", locked.body);
    // The 5 s wait runs from the fifth attempt's start (it is counted before its password is checked).
    let waits = ["5 s.", "4 s.", "3 s."].map(|w| format!("Too many sign-in attempts. Try again in {w}"));
    assert!(waits.iter().any(|w| locked.body.contains(w)), "{}", locked.body);
}

/// Guesses at one account from many addresses are slowed together: 6 addresses × 4 wrong
/// passwords, each address within its own limits, and past the account's 20 free ones each waits
/// (before: all 24 answered, 60 guesses in 3.6 s from 12 addresses). The device the owner signed
/// in on before is not slowed by them; on a fresh device the owner waits a minute at most. (The
/// waits are the store's, in seconds: a machine slow enough to outlast one lets the next attempt
/// in, which the test allows for the fresh device.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guesses_from_many_addresses_are_slowed_per_account_without_locking_the_owner_out() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Spread").await;
    user(&app, &gym, "owner@spread.example", "owner", &[]).await;
    let owner = Browser::from_address(&app, "127.0.0.1");
    assert_eq!(owner.sign_in("owner@spread.example", PASSWORD).await.status, 303);
    let mut statuses = Vec::new();
    for i in 2..=7 {
        let guesser = Browser::from_address(&app, &format!("127.0.0.{i}"));
        for _ in 0..4 {
            statuses.push(guesser.sign_in("owner@spread.example", "guess").await.status);
        }
    }
    assert_eq!(statuses.iter().filter(|s| **s == 401).count(), 20, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 4, "{statuses:?}");

    // A fresh device is slowed like the guessers, a minute at most (or let in, should the wait
    // have passed on a slow machine): never locked out.
    let fresh = Browser::from_address(&app, "127.0.0.9");
    let slowed = fresh.sign_in("owner@spread.example", PASSWORD).await;
    assert!(slowed.status == 429 || slowed.status == 303, "{}", slowed.status);
    if slowed.status == 429 {
        let wait = slowed.body.split("Try again in ").nth(1).unwrap_or_default();
        let seconds = wait.split(' ').next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(u64::MAX);
        let minutes = wait.split(' ').nth(1).is_some_and(|unit| unit.starts_with("min"));
        assert!(if minutes { seconds <= 1 } else { seconds <= 60 }, "{wait}");
    }
    // The device the owner signed in on is not slowed at all.
    assert_eq!(owner.sign_in("owner@spread.example", PASSWORD).await.status, 303, "a known device");
}

/// The cookie that makes a device known to an account names the device: two devices signing in to
/// one account each get their own, and a device keeps its own over its sign-ins (it was the
/// account's digest alone, the same on every device for 180 days).
#[tokio::test]
async fn each_device_is_known_by_a_cookie_of_its_own() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Two desks").await;
    user(&app, &gym, "owner@desks.example", "owner", &[]).await;
    let (front, back) = (Browser::new(&app), Browser::new(&app));
    for b in [&front, &back] {
        assert_eq!(b.sign_in("owner@desks.example", PASSWORD).await.status, 303);
    }
    let (first, second) = (front.cookie("gymapi_device").unwrap(), back.cookie("gymapi_device").unwrap());
    assert_ne!(first, second, "each device its own");
    assert_eq!(front.sign_in("owner@desks.example", PASSWORD).await.status, 303);
    assert_eq!(front.cookie("gymapi_device").unwrap(), first, "a device keeps its own");
}

/// A guesser on another address never keeps the owner out, successes are not counted, and a
/// success clears the device's failures.
#[tokio::test]
async fn sign_in_throttling_never_locks_the_owner_out() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Owned").await;
    user(&app, &gym, "owner@owned.example", "owner", &[]).await;
    let guesser = Browser::from_address(&app, "127.0.0.2");
    let mut refused = 0;
    for _ in 0..12 {
        let r = guesser.sign_in("owner@owned.example", "guess").await;
        assert!(r.status == 401 || r.status == 429, "{}", r.status);
        refused += usize::from(r.status == 429);
    }
    assert!(refused > 0, "the guesser is slowed down");
    let owner = Browser::from_address(&app, "127.0.0.1");
    for _ in 0..12 {
        assert_eq!(owner.sign_in("owner@owned.example", PASSWORD).await.status, 303, "successes are not counted");
    }
    for _ in 0..4 {
        assert_eq!(owner.sign_in("owner@owned.example", "typo").await.status, 401);
    }
    assert_eq!(owner.sign_in("owner@owned.example", PASSWORD).await.status, 303);
    for _ in 0..4 {
        assert_eq!(owner.sign_in("owner@owned.example", "typo").await.status, 401, "the success cleared them");
    }
    assert_eq!(owner.sign_in("owner@owned.example", PASSWORD).await.status, 303);
}

/// Twelve sign-ins sent at once, each for an email of its own: each is answered as a wrong
/// password, and no more than two password hashes run at once (argon2 holds 19 MiB a hash: a
/// hundred at once took the server to almost 2 GB); the others wait their turn, as `/metrics`
/// counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_ins_sent_at_once_take_turns_at_the_password_hash() {
    let app = TestApp::spawn_with(|c| c.metrics_token = Some("scrape".into())).await;
    let mut ready = Vec::new();
    for i in 0..12 {
        let b = Browser::new(&app);
        let form = b.get("/settings/sign-in").await;
        assert_eq!(form.status, 200);
        ready.push((b, format!("nobody{i}@turns.example"), form.csrf()));
    }
    let sent = ready.iter().map(|(b, email, csrf)| async move {
        b.post("/settings/sign-in", &[("email", email), ("password", "a long guess"), ("csrf", csrf)]).await
    });
    let statuses: Vec<u16> = futures_util::future::join_all(sent).await.iter().map(|p| p.status).collect();
    assert_eq!(statuses, vec![401; 12]);
    let metrics =
        app.raw(reqwest::Method::GET, "/metrics").bearer_auth("scrape").send().await.unwrap().text().await.unwrap();
    let waits = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gymapi_sign_in_hash_waits_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no sign-in hash waits in /metrics: {metrics}"));
    assert!(waits >= 1.0, "twelve hashes at once ran without waiting: {waits}");
}

/// Forty wrong passwords for one email from one address, sent at once: only the free attempts are
/// checked, every other one waits (its attempt is counted before its password is).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_ins_sent_at_once_get_no_more_guesses_than_one_by_one() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Rushed").await;
    user(&app, &gym, "owner@rushed.example", "owner", &[]).await;
    let mut ready = Vec::new();
    for _ in 0..40 {
        let b = Browser::new(&app);
        let form = b.get("/settings/sign-in").await;
        assert_eq!(form.status, 200);
        ready.push((b, form.csrf()));
    }
    let sent = ready.iter().map(|(b, csrf)| async move {
        b.post("/settings/sign-in", &[("email", "owner@rushed.example"), ("password", "guess"), ("csrf", csrf)]).await
    });
    let statuses: Vec<u16> = futures_util::future::join_all(sent).await.iter().map(|p| p.status).collect();
    let checked = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(checked + statuses.iter().filter(|s| **s == 429).count(), 40, "{statuses:?}");
    assert!(checked <= 5, "{checked} of 40 passwords were checked: {statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_endpoints_are_managed_from_the_page() {
    let app = TestApp::spawn_with(|c| c.webhook_allow_private = true).await;
    let gym = app.gym("Hooked").await;
    let b = signed_in(&app, &gym, "owner@hooked.example", "owner", &[]).await;
    let page = b.get("/settings/integrations/webhooks").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Deliveries per day"));
    let added = b
        .post(
            "/settings/integrations/webhooks/endpoints",
            &[
                ("csrf", &page.csrf()),
                ("url", "http://127.0.0.1:9/hook"),
                ("environment", "live"),
                ("events", "member.created"),
            ],
        )
        .await;
    assert_eq!(added.status, 200, "{}", added.body);
    assert!(added.body.contains("whsec_"), "the secret, shown once");
    let endpoint = gymapi::webhooks::list_endpoints(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap();
    assert_eq!(endpoint.len(), 1);
    assert_eq!(endpoint[0].event_types.as_deref(), Some("member.created"));
    let id = endpoint[0].id;
    let pinged =
        b.post(&format!("/settings/integrations/webhooks/endpoints/{id}/ping"), &[("csrf", &page.csrf())]).await;
    assert_eq!(pinged.status, 303);
    let page = b.get("/settings/integrations/webhooks").await;
    assert!(page.body.contains("<code>ping</code>"), "the ping is among the recent deliveries");
    assert!(!page.body.contains("whsec_"), "the secret is not shown again");
    let disabled =
        b.post(&format!("/settings/integrations/webhooks/endpoints/{id}/disable"), &[("csrf", &page.csrf())]).await;
    assert_eq!(disabled.status, 303);
    assert!(b.get("/settings/integrations/webhooks").await.body.contains("Disabled"));
}

/// The Devices page shows 50 devices a page, doors and terminals alike, with links between pages;
/// a page past the last shows the last (before: every device on one page, one or two queries
/// each: 4,000 devices took about 1 s and 1.5 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_devices_page_is_paginated() {
    let app = TestApp::spawn_with(|c| c.device_rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Many doors").await;
    for i in 0..55 {
        let kind = ["door", "card_terminal", "kiosk"][i % 3];
        let body = json!({"kind": kind, "name": format!("Device {i:02}")});
        let r = app.device("POST", "/devices", &gym.live_key, Some(body), &[]).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let owner = signed_in(&app, &gym, "owner@many.example", "owner", &[]).await;
    let first = owner.get("/settings/devices").await;
    assert_eq!(first.status, 200);
    assert!(first.body.contains("Page 1 of 2") && first.body.contains("Device 49"), "{}", first.body);
    assert!(!first.body.contains("Device 50"), "{}", first.body);
    assert!(first.body.contains(r#"href="/settings/devices?page=2""#), "{}", first.body);
    let second = owner.get("/settings/devices?page=2").await;
    assert!(second.body.contains("Device 54") && !second.body.contains("Device 49"), "{}", second.body);
    assert!(second.body.contains("No commands waiting") && second.body.contains("No payments waiting"));
    assert!(owner.get("/settings/devices?page=9").await.body.contains("Page 2 of 2"));
    assert!(owner.get("/settings/devices?page=x").await.body.contains("Page 1 of 2"));
}

/// The Devices page lists the gym's devices and its sandbox's with their status; only users with
/// settings.manage rename, move or remove one, and only their own gym's.
#[tokio::test]
async fn devices_are_renamed_moved_and_removed_by_managers_only() {
    let app = TestApp::spawn().await;
    let (gym, other) = (app.gym("Iron Temple").await, app.gym("Elsewhere").await);
    let register = |key: String, name: &'static str| {
        let app = &app;
        async move {
            let r = app.device("POST", "/devices", &key, Some(json!({"kind": "door", "name": name})), &[]).await;
            assert_eq!(r.status, 201, "{}", r.body);
            r.body["id"].as_str().unwrap().to_string()
        }
    };
    let door = register(gym.live_key.clone(), "Front door").await;
    let foreign = register(other.live_key.clone(), "Not yours").await;
    accounts::provision_sandbox(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap();
    let test_key =
        accounts::create_key(&app.db, &accounts::Actor::Operator, gym.id, Environment::Test, "t").await.unwrap();
    register(test_key.key, "Rehearsal door").await;
    let annex = gymapi::facilities::NewFacility { name: "Annex".into(), ..Default::default() };
    let annex = gymapi::facilities::create(&app.db, gym.id, annex).await.unwrap();

    let owner = signed_in(&app, &gym, "owner@iron.example", "owner", &[]).await;
    let page = owner.get("/settings/devices").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Front door") && page.body.contains("Never seen"), "{}", page.body);
    assert!(page.body.contains("Rehearsal door") && page.body.contains("Sandbox"));
    assert!(!page.body.contains("Not yours"));
    let beat = app.device("POST", &format!("/devices/{door}/heartbeat"), &gym.live_key, None, &[]).await;
    assert_eq!(beat.status, 200);
    assert!(owner.get("/settings/devices").await.body.contains("Online"));

    let desk = signed_in(&app, &gym, "desk@iron.example", "employee", &[]).await;
    let viewed = desk.get("/settings/devices").await;
    assert!(viewed.body.contains("Front door") && !viewed.body.contains(">Edit<"));
    let refused =
        desk.post(&format!("/settings/devices/{door}"), &[("csrf", &viewed.csrf()), ("name", "Hacked")]).await;
    assert_eq!(refused.status, 403);

    let form = owner.get(&format!("/settings/devices/{door}")).await;
    let csrf = form.csrf();
    let blank = owner.post(&format!("/settings/devices/{door}"), &[("csrf", &csrf), ("name", "  ")]).await;
    assert_eq!(blank.status, 422);
    assert!(blank.body.contains("The device name must have 1 to 100 characters."), "{}", blank.body);
    let annex_id = annex.id.to_string();
    let moved = owner
        .post(
            &format!("/settings/devices/{door}"),
            &[("csrf", &csrf), ("name", "Garden door"), ("facility_id", &annex_id)],
        )
        .await;
    assert_eq!((moved.status, moved.location.as_deref()), (303, Some("/settings/devices")));
    let seen = app.device("GET", &format!("/devices/{door}"), &gym.live_key, None, &[]).await;
    assert_eq!(
        (seen.body["name"].as_str(), seen.body["facility_id"].as_str()),
        (Some("Garden door"), Some(&*annex_id))
    );
    let elsewhere = other_facility(&app, &other).await;
    let wrong = owner
        .post(
            &format!("/settings/devices/{door}"),
            &[("csrf", &csrf), ("name", "Garden door"), ("facility_id", &elsewhere)],
        )
        .await;
    assert_eq!(wrong.status, 422);

    assert_eq!(owner.get(&format!("/settings/devices/{foreign}")).await.status, 404);
    assert_eq!(owner.post(&format!("/settings/devices/{foreign}/remove"), &[("csrf", &csrf)]).await.status, 404);
    assert_eq!(app.device("GET", &format!("/devices/{foreign}"), &other.live_key, None, &[]).await.status, 200);
    assert_eq!(owner.post(&format!("/settings/devices/{door}/remove"), &[]).await.status, 403);
    let removed = owner.post(&format!("/settings/devices/{door}/remove"), &[("csrf", &csrf)]).await;
    assert_eq!(removed.status, 303);
    assert_eq!(app.device("GET", &format!("/devices/{door}"), &gym.live_key, None, &[]).await.status, 404);
}

/// The Devices page shows what waits for each device and its latest failure: a terminal's waiting
/// payments and its latest decline, a printer's waiting receipts.
#[tokio::test]
async fn the_devices_page_shows_each_queue_and_its_last_error() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Queues").await;
    let k = gym.live_key.clone();
    let register = |kind: &'static str, name: &'static str| {
        let (app, k) = (&app, k.clone());
        async move {
            let r = app.device("POST", "/devices", &k, Some(json!({"kind": kind, "name": name})), &[]).await;
            r.body["id"].as_str().unwrap().to_string()
        }
    };
    let terminal = register("card_terminal", "Till").await;
    register("fiscal_printer", "Printer").await;
    let rows = json!({"rows": [{"legacy_id": "B", "name": "Bar", "price": {"amount": 250, "currency": "EUR"}}]});
    app.post(&k, "/import/products", rows).await;
    let product = app.get(&k, "/products").await.body["data"][0]["id"].clone();
    for _ in 0..3 {
        let order = json!({"lines": [{"product_id": product, "quantity": 1}]});
        assert_eq!(app.device("POST", "/orders", &k, Some(order), &[]).await.status, 201);
    }
    let jobs = app.device("GET", &format!("/terminals/{terminal}/jobs"), &k, None, &[]).await.body;
    let job = jobs["data"][0]["id"].as_str().unwrap();
    let declined = json!({"outcome": "declined", "reason": "Card blocked"});
    let path = format!("/terminals/{terminal}/jobs/{job}/report");
    assert_eq!(app.device("POST", &path, &k, Some(declined), &[]).await.status, 200);

    let owner = signed_in(&app, &gym, "owner@queues.example", "owner", &[]).await;
    let page = owner.get("/settings/devices").await.body;
    assert!(page.contains("2 payments waiting"), "{page}");
    assert!(page.contains("Last error: Card blocked"), "{page}");
    assert!(page.contains("No receipts waiting"), "{page}");
    let one = owner.get(&format!("/settings/devices/{terminal}")).await.body;
    assert!(one.contains("2 payments waiting") && one.contains("Card blocked"), "{one}");
}

/// The id of the first facility of a gym.
async fn other_facility(app: &TestApp, gym: &Gym) -> String {
    accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap().id.to_string()
}

/// The webhook URL guard refuses every IPv6 spelling of a private IPv4 address: IPv4-compatible,
/// IPv4-mapped, NAT64, 6to4 and Teredo; a public one of the same forms is taken.
#[tokio::test]
async fn webhook_urls_in_ipv6_forms_of_private_addresses_are_refused() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Guarded").await;
    let b = signed_in(&app, &gym, "owner@guarded.example", "owner", &[]).await;
    let page = b.get("/settings/integrations/webhooks").await;
    let add = |url: &'static str| {
        let csrf = page.csrf();
        let b = &b;
        async move {
            let form = [("csrf", csrf.as_str()), ("url", url), ("environment", "live"), ("events", "member.created")];
            b.post("/settings/integrations/webhooks/endpoints", &form).await
        }
    };
    for url in [
        "https://[::127.0.0.1]/h",
        "https://[::ffff:10.0.0.1]/h",
        "https://[64:ff9b::192.168.1.1]/h",
        "https://[2002:7f00:1::1]/h",
        "https://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/h",
    ] {
        let refused = add(url).await;
        assert!(refused.body.contains("is not a public address"), "{url}: {}", refused.body);
    }
    let listed = gymapi::webhooks::list_endpoints(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    let taken = add("https://[64:ff9b::1.1.1.1]/h").await;
    assert!(taken.body.contains("whsec_"), "{}", taken.body);
}

/// Revoking a key on the settings page ends its devices' waiting polls at once with 401, and a
/// door signed in again with a new key gets the next command.
#[tokio::test]
async fn revoking_a_key_ends_its_devices_waiting_polls_at_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Revoked door").await;
    let b = signed_in(&app, &gym, "owner@revoked.example", "owner", &[]).await;
    let register = |kind: &'static str| {
        let (app, key) = (&app, gym.live_key.clone());
        async move {
            let r = app.device("POST", "/devices", &key, Some(json!({"kind": kind, "name": kind})), &[]).await;
            r.body["id"].as_str().unwrap().to_string()
        }
    };
    let (door, bell) = (register("door").await, register("doorbell").await);
    let url = format!("{}/api/v1/devices/doors/{door}/commands?wait=20", app.address);
    let waiting = tokio::spawn(crate::common::http_client().get(url).bearer_auth(&gym.live_key).send());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let page = b.get("/settings/integrations/api").await;
    let path = format!("/settings/integrations/api/keys/{}/revoke", gym.live_key_id);
    let started = std::time::Instant::now();
    assert_eq!(b.post(&path, &[("csrf", &page.csrf())]).await.status, 303);
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(answer.status().as_u16(), 401, "the waiting poll ends with the key");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "at once, not at the end of its wait");

    let new =
        accounts::create_key(&app.db, &accounts::Actor::Operator, gym.id, Environment::Live, "again").await.unwrap();
    let rang = app.device("POST", &format!("/doorbells/{bell}/rings"), &new.key, Some(json!({})), &[]).await;
    assert_eq!(rang.status, 201, "{}", rang.body);
    let ring = rang.body["id"].as_str().unwrap();
    let opened =
        app.device("POST", &format!("/rings/{ring}/open"), &new.key, Some(json!({"door_id": door})), &[]).await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    let commands = app.device("GET", &format!("/doors/{door}/commands?wait=0"), &new.key, None, &[]).await;
    assert_eq!(commands.body["data"].as_array().unwrap().len(), 1, "the door signed in again gets it");
}

/// A NUL character in any field of any form is refused with a page that says so (422), and nothing
/// is written: PostgreSQL cannot store one in text (it answered 500), SQLite stored it. The sign-in
/// form too, whose email is looked up.
#[tokio::test]
async fn a_nul_in_any_form_field_is_refused_and_nothing_is_written() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Null Gym").await;
    let r =
        app.device("POST", "/devices", &gym.live_key, Some(json!({"kind": "door", "name": "Front door"})), &[]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let door = r.body["id"].as_str().unwrap().to_string();
    let facility = app.get(&gym.live_key, "/facilities").await.body["data"][0]["id"].as_str().unwrap().to_string();
    let owner = signed_in(&app, &gym, "owner@null.example", "owner", &[]).await;
    let nul = "Annex\0";
    let forms: [(String, Vec<(&str, &str)>); 5] = [
        ("/facilities".into(), vec![("name", nul), ("address", ""), ("timezone", ""), ("environment", "live")]),
        (format!("/facilities/{facility}"), vec![("name", nul)]),
        (format!("/devices/{door}"), vec![("name", nul), ("facility_id", &facility)]),
        ("/integrations/api/keys".into(), vec![("name", nul), ("environment", "live")]),
        ("/integrations/webhooks/endpoints".into(), vec![("url", "https://hooks.example/\0"), ("environment", "live")]),
    ];
    for (path, fields) in &forms {
        let csrf = owner.get("/settings/integrations/api").await.csrf();
        let r = owner.post(&format!("/settings{path}"), &[&fields[..], &[("csrf", &csrf)]].concat()).await;
        assert_eq!(r.status, 422, "{path}: {}", r.body);
        assert!(r.body.contains("NUL character"), "{path}: {}", r.body);
    }
    let facilities = app.get(&gym.live_key, "/facilities").await;
    assert_eq!(facilities.body["meta"]["total"], 1, "{}", facilities.body);
    assert!(!facilities.body.to_string().contains("Annex"));
    let device = app.device("GET", &format!("/devices/{door}"), &gym.live_key, None, &[]).await;
    assert_eq!(device.body["name"], "Front door");
    let keys = accounts::list_keys(&app.db, &accounts::Actor::Operator, gym.id).await.unwrap();
    assert!(keys.iter().all(|k| !k.name.contains('\0')), "no key named with a NUL");
    assert!(!owner.get("/settings/integrations/webhooks").await.body.contains("hooks.example"));

    let stranger = Browser::new(&app);
    let r = stranger.sign_in("owner@null.example\0", PASSWORD).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("NUL character"), "{}", r.body);
}

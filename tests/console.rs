//! The operators' console (`/ui`) against a real `strata serve` (in
//! process, on 127.0.0.1:0) holding the fixture `tests/fixtures/console/`.
//!
//! - `the_console_in_a_real_browser`: headless Chromium driven through
//!   chromedriver (Debian's `chromium` and `chromium-driver`) with
//!   fantoccini: log in, every page, the actions, an XSS payload that must
//!   stay inert, refused keys. Screenshots go to `target/ui-screenshots/`.
//!   Without chromedriver it says SKIPPED and passes, unless
//!   `STRATA_REQUIRE_BROWSER_TESTS=1` (set by `scripts/test.sh`), where it fails.
//! - The other tests speak HTTP with reqwest: the cookie's flags, CSRF,
//!   refused keys, the security headers, escaping.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::{Client, Locator};
use serde_json::{json, Value};
use strata::config::WebhookEndpoint;
use strata::model::typed::{MemoryInput, NewMemory};
use strata::model::{KeyGrant, Role};
use strata::{Memory, NewMessage, Scope, SessionId};

/// The fixture's conversation (three sessions, one with an XSS payload) and typed memories.
fn fixture() -> Value {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/console/conversation.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn scope() -> Scope {
    Scope::new("alice", "bot").unwrap()
}

/// A server with the fixture, an admin key and a user key, and one parked
/// job (a webhook delivery to a port nobody listens on, one attempt).
struct Served {
    base: String,
    admin: String,
    user: String,
    mem: Memory,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<strata::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start() -> Served {
        std::env::set_var("STRATA_TEST_CONSOLE_WEBHOOK_SECRET", "whsec-console");
        let (mut cfg, dir) = common::config();
        cfg.webhooks.endpoints = vec![WebhookEndpoint {
            url: format!("http://127.0.0.1:{}/hook", common::free_port()),
            secret_env: "STRATA_TEST_CONSOLE_WEBHOOK_SECRET".into(),
            events: vec!["session.promoted".into()],
        }];
        cfg.webhooks.timeout_ms = 500;
        cfg.webhooks.max_attempts = 1;
        let mem = common::open(cfg).await;
        let f = fixture();
        let s = scope();
        for (i, session) in f["sessions"].as_array().unwrap().iter().enumerate() {
            let sid = SessionId::new(session["id"].as_str().unwrap()).unwrap();
            for (j, m) in session["messages"].as_array().unwrap().iter().enumerate() {
                let at = chrono::Utc::now() - chrono::Duration::days(30 - 10 * i as i64) + chrono::Duration::seconds(j as i64);
                let role = if m[0] == "user" { Role::User } else { Role::Assistant };
                let msg = NewMessage { role, name: m[1].as_str().map(str::to_string), content: m[2].as_str().unwrap().into(), timestamp: at, idempotency_key: None };
                mem.record(&s, &sid, msg).await.unwrap();
            }
            mem.end_session(&s, &sid).await.unwrap();
        }
        for m in f["memories"].as_array().unwrap() {
            let input: MemoryInput = serde_json::from_value(m.clone()).unwrap();
            mem.remember(&s, NewMemory::try_from(input).unwrap()).await.unwrap();
        }
        // an open session too
        mem.record(&s, &SessionId::new("s4-open").unwrap(), NewMessage::user("Still talking about Porto.", chrono::Utc::now())).await.unwrap();
        mem.wait_promoted().await.unwrap();
        let t0 = Instant::now();
        while mem.parked_jobs(10).await.unwrap().is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(60), "the webhook delivery never parked");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // extraction and dedup ("Ana-Lucia" and "Ana Lucia" merge) are done
        mem.wait_idle().await.unwrap();
        let (_, admin) = mem.create_api_key(KeyGrant::Admin, "console test admin").await.unwrap();
        let (_, user) = mem.create_api_key(KeyGrant::User { user_id: "alice".into() }, "console test user").await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(strata::server::serve(listener, mem.clone(), None, async move {
            let _ = rx.await;
        }));
        common::wait_ready(&base, 30).await;
        // a few injects through the server, so the score histogram has data
        for q in ["Where does Alice live now?", "What tea does Alice drink?", "quantum chromodynamics lecture notes"] {
            mem.inject(&s, &SessionId::new("probe").unwrap(), q).await.unwrap();
        }
        Served { base, admin, user, mem, stop: Some(tx), task, _dir: dir }
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.unwrap().unwrap();
    }
}

/// An HTTP client with the console's cookie (set by [`Http::login`]); it
/// does not follow redirects.
struct Http {
    c: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl Http {
    fn new(base: &str) -> Http {
        Http { c: reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap(), base: base.into(), cookie: None }
    }
    fn with_cookie(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.cookie {
            Some(c) => r.header("cookie", c),
            None => r,
        }
    }
    async fn get(&self, path: &str) -> reqwest::Response {
        self.with_cookie(self.c.get(format!("{}{path}", self.base))).send().await.unwrap()
    }
    async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        const ENC: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC;
        let body = form
            .iter()
            .map(|(k, v)| format!("{}={}", percent_encoding::utf8_percent_encode(k, ENC), percent_encoding::utf8_percent_encode(v, ENC)))
            .collect::<Vec<_>>()
            .join("&");
        self.with_cookie(self.c.post(format!("{}{path}", self.base)))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
    }
    /// Logs in with `key`; keeps the session cookie when one is set.
    async fn login(&mut self, key: &str) -> reqwest::Response {
        let r = self.post("/ui/login", &[("key", key)]).await;
        if let Some(v) = r.headers().get("set-cookie") {
            self.cookie = Some(v.to_str().unwrap().split(';').next().unwrap().to_string());
        }
        r
    }
}

/// The CSRF token of a page's first form.
fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form with a token");
    html[at + 19..].split('"').next().unwrap().to_string()
}

#[tokio::test]
async fn login_sets_a_strict_http_only_cookie_and_refuses_other_keys() {
    let s = Served::start().await;
    let mut c = Http::new(&s.base);
    // no session: pages send the browser to the login form, actions are refused
    let r = c.get("/ui").await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/ui/login");
    assert_eq!(c.post("/ui/ops/reload", &[("csrf", "x")]).await.status(), 403);
    // a made-up session cookie is no session
    c.cookie = Some(format!("strata_console={}", "ab".repeat(32)));
    assert_eq!(c.get("/ui").await.status(), 303);
    c.cookie = None;
    // a user key and an unknown key are refused and set no cookie
    for (key, status) in [(s.user.as_str(), 403), ("sk_strata_not_a_key", 401), ("", 401)] {
        let r = c.login(key).await;
        assert_eq!(r.status(), status, "key {key:?}");
        assert!(r.headers().get("set-cookie").is_none());
    }
    assert_eq!(c.get("/ui").await.status(), 303, "still logged out");
    // the admin key logs in
    let r = c.login(&s.admin).await;
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    for flag in ["strata_console=", "HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(!cookie.contains(&s.admin), "the key never goes to the browser");
    let r = c.get("/ui").await;
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let html = r.text().await.unwrap();
    assert!(html.contains(">alice</a>"), "the scope list names alice");
    // a malformed query string is a console page too, not axum's plain text
    let r = c.get("/ui/scopes/alice/bot/graph?hops=abc").await;
    assert_eq!(r.status(), 400);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(r.text().await.unwrap().contains("Bad request"));
    let r = c.get("/ui/scopes/alice/bot/memories?direction=sideways").await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("write asc or desc"));
    // a scope with typed memories and no session is listed too (0 sessions)
    let carol = Scope::new("carol", "notes").unwrap();
    let input: MemoryInput = serde_json::from_value(json!({"type": "fact", "content": "Carol keeps bees.", "metadata": {"category": "hobby"}})).unwrap();
    s.mem.remember(&carol, NewMemory::try_from(input).unwrap()).await.unwrap();
    let html = c.get("/ui?q=caro").await.text().await.unwrap();
    assert!(html.contains(">carol</a>") && !html.contains(">alice</a>"), "{html}");
    // the playground is a POST form with the session's token; a long message fits
    let token = csrf_of(&c.get("/ui/scopes/alice/bot/playground").await.text().await.unwrap());
    let play = "/ui/scopes/alice/bot/playground";
    assert_eq!(c.post(play, &[("message", "Where does Alice live?")]).await.status(), 403, "no token");
    let r = c.post(play, &[("csrf", token.as_str()), ("message", "Where does Alice live now?")]).await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("id=\"candidates\""));
    let long = "Which city did Alice move to? ".repeat(4_000);
    let r = c.post(play, &[("csrf", token.as_str()), ("message", long.as_str())]).await;
    assert_eq!(r.status(), 200, "a 120 KB message is no URL");
    // the token is checked before the path: a forged action learns nothing from it
    assert_eq!(c.post("/ui/ops/jobs/abc/retry", &[]).await.status(), 403);
    assert_eq!(c.post("/ui/ops/jobs/abc/retry", &[("csrf", token.as_str())]).await.status(), 400);
    s.stop().await;
}

#[tokio::test]
async fn actions_need_the_session_token_and_recalled_html_is_escaped() {
    let s = Served::start().await;
    let mut c = Http::new(&s.base);
    assert_eq!(c.login(&s.admin).await.status(), 303);
    let ops = c.get("/ui/ops").await.text().await.unwrap();
    let token = csrf_of(&ops);
    let job = s.mem.parked_jobs(10).await.unwrap()[0].id.0;
    let retry = format!("/ui/ops/jobs/{job}/retry");
    // no token, a wrong token: refused, the job stays parked
    let wrong = "0".repeat(64);
    for form in [vec![], vec![("csrf", wrong.as_str())]] {
        let r = c.post(&retry, &form).await;
        assert_eq!(r.status(), 403);
        assert!(s.mem.parked_jobs(10).await.unwrap().iter().any(|j| j.id.0 == job), "still parked");
    }
    let r = c.post(&retry, &[("csrf", token.as_str())]).await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("back in the queue"));
    // the XSS payload of the fixture is text on every page that shows it
    let ep = strata::model::EpisodeId::for_session(&scope(), &SessionId::new("s2-tea").unwrap());
    let page = c.get(&format!("/ui/scopes/alice/bot/episodes/{}", ep.as_str())).await.text().await.unwrap();
    assert!(!page.contains("<script>window.__xss"), "raw script tag in the page: {page}");
    assert!(!page.contains("<img src=x"), "raw img tag in the page");
    assert!(page.contains("&lt;script&gt;window.__xss"), "escaped: {}", &page[page.find("sencha").unwrap_or(0)..][..200.min(page.len())]);
    // the other actions, each with the token: reload, share, forget, undo a merge
    let r = c.post("/ui/ops/reload", &[("csrf", token.as_str())]).await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("Configuration reloaded"));
    let req = strata::typed::RetrieveRequest { filter: json!({"type": "fact"}), top_k: Some(10), ..Default::default() };
    let facts = s.mem.retrieve(&scope(), &req).await.unwrap().memories;
    assert_eq!(facts.len(), 2);
    let (keep, drop) = (facts[0].id.as_str().to_string(), facts[1].id.as_str().to_string());
    let share = format!("/ui/scopes/alice/bot/memories/{keep}/share");
    assert_eq!(c.post(&share, &[("to", "public")]).await.status(), 403, "no token");
    assert_eq!(c.post(&share, &[("csrf", token.as_str()), ("to", "nowhere")]).await.status(), 400);
    let r = c.post(&share, &[("csrf", token.as_str()), ("to", "public")]).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let all = strata::typed::RetrieveRequest { visibility: strata::model::typed::ReadVisibility::All, ..req.clone() };
    assert!(s.mem.retrieve(&scope(), &all).await.unwrap().memories.iter().any(|m| m.source == strata::model::typed::Visibility::Public));
    let forget = format!("/ui/scopes/alice/bot/memories/{drop}/forget");
    assert_eq!(c.post(&forget, &[("csrf", "nope")]).await.status(), 403);
    assert_eq!(s.mem.retrieve(&scope(), &req).await.unwrap().memories.len(), 2, "a refused forget deletes nothing");
    assert_eq!(c.post(&forget, &[("csrf", token.as_str())]).await.status(), 200);
    assert_eq!(s.mem.retrieve(&scope(), &req).await.unwrap().memories.len(), 1);
    let merges = s.mem.graph_merges(&scope(), 10).await.unwrap();
    let names: Vec<(String, String)> = s.mem.runtime().graph.entities_of_type(&scope(), None, 100).await.unwrap().into_iter().map(|e| (e.name, e.kind)).collect();
    let m = merges.iter().find(|m| m.undone_at.is_none()).unwrap_or_else(|| panic!("the fixture's Ana-Lucia / Ana Lucia merge: {merges:?} {names:?}"));
    let undo = format!("/ui/scopes/alice/bot/merges/{}/undo", m.id);
    assert_eq!(c.post(&undo, &[]).await.status(), 403);
    let r = c.post(&undo, &[("csrf", token.as_str())]).await;
    assert_eq!(r.status(), 200);
    assert!(s.mem.graph_merges(&scope(), 10).await.unwrap().iter().find(|x| x.id == m.id).unwrap().undone_at.is_some());
    // a logged-out session's token is dead
    let r = c.post("/ui/logout", &[("csrf", token.as_str())]).await;
    assert_eq!(r.status(), 303);
    assert_eq!(c.post(&retry, &[("csrf", token.as_str())]).await.status(), 403);
    s.stop().await;
}

/// chromedriver and chromium, or why not.
fn browser() -> Result<(PathBuf, PathBuf), String> {
    let find = |var: &str, names: &[&str]| -> Option<PathBuf> {
        std::env::var_os(var).map(PathBuf::from).or_else(|| {
            names.iter().map(PathBuf::from).find(|p| p.exists())
        })
    };
    let driver = find("STRATA_TEST_CHROMEDRIVER", &["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"])
        .ok_or("chromedriver not found (apt-get install chromium-driver, or set STRATA_TEST_CHROMEDRIVER)")?;
    let chromium = find("STRATA_TEST_CHROMIUM", &["/usr/bin/chromium", "/usr/lib/chromium/chromium"])
        .ok_or("chromium not found (apt-get install chromium, or set STRATA_TEST_CHROMIUM)")?;
    Ok((driver, chromium))
}

/// A chromedriver process, killed on drop.
struct Driver(std::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_browser(driver: &PathBuf, chromium: &PathBuf) -> (Driver, Client) {
    let port = common::free_port();
    let child = std::process::Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let d = Driver(child);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium, "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}),
    );
    let t0 = Instant::now();
    loop {
        let r = fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await;
        match r {
            Ok(c) => return (d, c),
            Err(e) if t0.elapsed() < Duration::from_secs(30) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("no WebDriver session: {e}"),
        }
    }
}

/// Writes a screenshot of the page to `target/ui-screenshots/NAME.png`.
async fn shot(c: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// The text of the element `css`, retried for up to 10 s while a click's
/// navigation replaces the page (a stale or not yet present element).
async fn text_of(c: &Client, css: &str) -> String {
    let t0 = Instant::now();
    loop {
        let got = match c.find(Locator::Css(css)).await {
            Ok(e) => e.text().await,
            Err(e) => Err(e),
        };
        match got {
            Ok(t) => return t,
            Err(e) if t0.elapsed() > Duration::from_secs(10) => panic!("{css}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Waits (at most 10 s) until the text of `css` contains `needle`; returns it.
async fn wait_text(c: &Client, css: &str, needle: &str) -> String {
    wait_for(c, css, &format!("said {needle:?}"), |t| t.contains(needle)).await
}

/// Waits (at most 10 s) until the text of `css` satisfies `ok` (`what` names
/// the condition for the failure message), and returns that text.
async fn wait_for(c: &Client, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    loop {
        let t = text_of(c, css).await;
        if ok(&t) {
            return t;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{css} never {what}: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (at most 10 s) until the page's URL ends with `suffix`.
async fn wait_url(c: &Client, suffix: &str) {
    let t0 = Instant::now();
    loop {
        let url = c.current_url().await.unwrap();
        if url.as_str().ends_with(suffix) {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "at {url}, waiting for …{suffix}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn script(c: &Client, js: &str) -> Value {
    c.execute(js, vec![]).await.unwrap()
}

#[tokio::test]
async fn the_console_in_a_real_browser() {
    let (driver, chromium) = match browser() {
        Ok(b) => b,
        Err(why) => {
            assert!(std::env::var("STRATA_REQUIRE_BROWSER_TESTS").is_err(), "STRATA_REQUIRE_BROWSER_TESTS is set: {why}");
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let s = Served::start().await;
    let (_d, c) = start_browser(&driver, &chromium).await;
    let b = &s.base;

    // refused: no key (sent to the login form), then a user key
    c.goto(&format!("{b}/ui/ops")).await.unwrap();
    wait_url(&c, "/ui/login").await;
    c.find(Locator::Css("#key")).await.unwrap().send_keys(&s.user).await.unwrap();
    c.find(Locator::Css("#login")).await.unwrap().click().await.unwrap();
    wait_text(&c, "main", "not an admin key").await;

    // log in
    c.goto(&format!("{b}/ui/login")).await.unwrap();
    shot(&c, "login").await;
    c.find(Locator::Css("#key")).await.unwrap().send_keys(&s.admin).await.unwrap();
    c.find(Locator::Css("#login")).await.unwrap().click().await.unwrap();
    wait_url(&c, "/ui").await;
    assert_eq!(script(&c, "return document.cookie").await, json!(""), "the session cookie is HttpOnly");
    let scopes = text_of(&c, "#scopes").await;
    assert!(scopes.contains("alice") && scopes.contains("bot"), "{scopes}");
    // the keyboard: "/" puts the cursor in the search box
    let slash = KeyActions::new("keyboard".into()).then(KeyAction::Down { value: '/' }).then(KeyAction::Up { value: '/' });
    c.perform_actions(slash).await.unwrap();
    assert_eq!(script(&c, "return document.activeElement.id").await, json!("q"));
    shot(&c, "scopes").await;

    // the timeline: statuses and abstracts, then the full episode on click
    c.find(Locator::LinkText("alice")).await.unwrap().click().await.unwrap();
    let tl = text_of(&c, "#timeline").await;
    for want in ["s1-move", "s2-tea", "s3-trip", "s4-open", "promoted", "open"] {
        assert!(tl.contains(want), "{want} in {tl}");
    }
    shot(&c, "timeline").await;
    // phone width: nothing wider than the screen
    c.set_window_size(390, 844).await.unwrap();
    assert_eq!(script(&c, "return document.documentElement.scrollWidth <= window.innerWidth + 1").await, json!(true));
    shot(&c, "timeline-phone").await;
    c.set_window_size(1280, 900).await.unwrap();
    let links = c.find_all(Locator::Css("a.expand")).await.unwrap();
    assert_eq!(links.len(), 3, "one per promoted session");
    // the tea session holds the XSS payload: shown as text, never run
    c.goto(&format!("{b}/ui/scopes/alice/bot/episodes/{}", strata::model::EpisodeId::for_session(&scope(), &SessionId::new("s2-tea").unwrap()).as_str())).await.unwrap();
    let msgs = text_of(&c, "#messages").await;
    assert!(msgs.contains("<script>window.__xss = 1</script>"), "the payload is visible as text: {msgs}");
    assert_eq!(script(&c, "return typeof window.__xss").await, json!("undefined"), "the payload did not run");
    assert_eq!(script(&c, "return document.querySelectorAll('main script, main img').length").await, json!(0));
    shot(&c, "episode").await;

    // the inject playground
    c.goto(&format!("{b}/ui/scopes/alice/bot/playground")).await.unwrap();
    c.find(Locator::Css("#history")).await.unwrap().send_keys("We talked about moving last spring").await.unwrap();
    c.find(Locator::Css("#message")).await.unwrap().send_keys("Which city did I move to with Rita?").await.unwrap();
    c.find(Locator::Css("#run")).await.unwrap().click().await.unwrap();
    let section = text_of(&c, "#section").await;
    assert!(section.contains("Memory Context") && section.contains("Lisbon"), "{section}");
    let cands = text_of(&c, "#candidates").await;
    assert!(cands.contains("min_score") && cands.contains("kept"), "{cands}");
    shot(&c, "playground").await;

    // the score histogram with the min_score line
    c.goto(&format!("{b}/ui/scores")).await.unwrap();
    assert!(c.find(Locator::Css("#min-score-line")).await.is_ok());
    let bars = c.find_all(Locator::Css("#histogram rect.bar")).await.unwrap();
    assert!(!bars.is_empty());
    assert!(text_of(&c, "#score-summary").await.contains("injects"));
    shot(&c, "scores").await;

    // the graph around Rita
    c.goto(&format!("{b}/ui/scopes/alice/bot/graph")).await.unwrap();
    assert!(text_of(&c, "#entities").await.contains("Rita"));
    c.find(Locator::LinkText("Rita")).await.unwrap().click().await.unwrap();
    let nodes = c.find_all(Locator::Css("#graph g.node")).await.unwrap();
    assert!(nodes.len() >= 2, "Rita and a neighbour");
    assert!(text_of(&c, "#graph").await.contains("Rita"));
    assert!(c.find(Locator::Css("#merges")).await.is_ok());
    shot(&c, "graph").await;

    // typed memories with a filter
    c.goto(&format!("{b}/ui/scopes/alice/bot/memories")).await.unwrap();
    assert_eq!(c.find_all(Locator::Css("#memories tbody tr")).await.unwrap().len(), 3);
    c.find(Locator::Css("#filter")).await.unwrap().send_keys(r#"{"type": "event"}"#).await.unwrap();
    c.find(Locator::Css("#apply")).await.unwrap().click().await.unwrap();
    // the unfiltered table already holds the event: wait for the filtered one
    let filtered = |t: &str| t.contains("booked a trip to Porto") && !t.contains("sencha");
    let rows = wait_for(&c, "#memories tbody", "showed the event alone", filtered).await;
    assert!(filtered(&rows), "{rows}");
    assert!(rows.contains("event"), "the category is shown: {rows}");
    shot(&c, "memories").await;

    // operations: retry the parked job
    c.goto(&format!("{b}/ui/ops")).await.unwrap();
    assert!(text_of(&c, "#parked").await.contains("webhook"), "the parked delivery is listed");
    assert!(text_of(&c, "#config").await.contains("min_score"));
    shot(&c, "ops").await;
    c.find(Locator::Css("button.retry")).await.unwrap().click().await.unwrap();
    wait_text(&c, "main", "back in the queue").await;

    // logging out ends the session
    c.goto(&format!("{b}/ui")).await.unwrap();
    c.find(Locator::Css("nav form button")).await.unwrap().click().await.unwrap();
    // the logout POST answers with the login page: wait for it, or the next
    // navigation may cancel the form before the server ends the session
    wait_url(&c, "/ui/login").await;
    c.goto(&format!("{b}/ui/ops")).await.unwrap();
    wait_url(&c, "/ui/login").await;
    c.close().await.unwrap();
    s.stop().await;
}

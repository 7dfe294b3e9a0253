//! Just enough of the W3C WebDriver protocol to drive a real headless Chromium through
//! ChromeDriver: open pages, find elements by CSS selector, type, click, accept a
//! confirmation, read text, take a screenshot.

use base64::Engine;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A ChromeDriver process and one browser session; both end when dropped.
pub struct Browser {
    driver: std::process::Child,
    http: reqwest::Client,
    session: String,
    base: String,
    profile: std::path::PathBuf,
}

/// Why the browser test cannot run here, when it cannot.
pub fn missing() -> Option<String> {
    for tool in ["chromedriver", "chromium"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!(
                "{tool} is not installed (Debian: apt-get install chromium chromium-driver; scripts/test installs them as root)"
            ));
        }
    }
    None
}

impl Browser {
    /// Starts ChromeDriver on a free port and a headless Chromium session.
    pub async fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = std::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile =
            std::env::temp_dir().join(format!("remuda-chromium-{}-{port}", std::process::id()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1000", format!("--user-data-dir={}", profile.display())]
            }
        }}});
        let mut browser = Browser {
            driver,
            http,
            session: String::new(),
            base,
            profile,
        };
        let answer = browser.call("POST", "/session", Some(capabilities)).await;
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string();
        browser
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let request = self.http.request(method.parse().expect("method"), url);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let response = request.send().await.expect("webdriver request");
        let value: Value = response.json().await.expect("webdriver json");
        value.get("value").cloned().unwrap_or(value)
    }

    /// Opens `url`.
    pub async fn go(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url}))).await;
    }

    /// The first element matching `css`, waiting up to 10 s for it.
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = self
                .call(
                    "POST",
                    "/element",
                    Some(json!({"using": "css selector", "value": css})),
                )
                .await;
            if let Some(id) = found[ELEMENT].as_str() {
                return id.to_string();
            }
            assert!(Instant::now() < deadline, "no element {css}: {found}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `text` into the element `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Clicks the element `css`.
    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.call("POST", &format!("/element/{id}/click"), Some(json!({})))
            .await;
    }

    /// Accepts the confirmation the page asks, waiting up to 5 s for it.
    pub async fn accept(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = self.call("GET", "/alert/text", None).await;
            if text.is_string() {
                self.call("POST", "/alert/accept", Some(json!({}))).await;
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no confirmation was asked: {text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The text of the element `css`.
    pub async fn text(&self, css: &str) -> String {
        let id = self.find(css).await;
        let text = self.call("GET", &format!("/element/{id}/text"), None).await;
        text.as_str().unwrap_or_default().to_string()
    }

    /// Reloads the page until the element `css` shows `expected`, for up to `within`.
    pub async fn wait_for_text(&self, url: &str, css: &str, expected: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            self.go(url).await;
            let text = self.text(css).await;
            if text.contains(expected) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{css} at {url} shows {text:?}, not {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// The value of the JavaScript `script` (a function body that `return`s it) in the page.
    pub async fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The current page's URL.
    pub async fn url(&self) -> String {
        self.call("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Vec<u8> {
        let data = self.call("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap_or_default())
            .expect("base64 PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // ChromeDriver ends the browser only when the session is deleted: killed, it leaves
        // Chromium running (Drop cannot await the deletion). So whatever still runs with this
        // browser's own profile directory is ended after the driver, which also covers a
        // test that panicked half-way
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::process::Command::new("pkill")
            .arg("-f")
            .arg("--")
            .arg(format!("--user-data-dir={}", self.profile.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

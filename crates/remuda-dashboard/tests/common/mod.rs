//! A dashboard served on 127.0.0.1 over a fresh test database, and an HTTP client for it.
#![allow(dead_code, missing_docs)]

pub mod webdriver;

use remuda::testing::TestDatabase;
use remuda::Client;
use remuda_dashboard::{Dashboard, Token};
use serde_json::Value;

/// The token every test dashboard opens with.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running dashboard; stopped when dropped.
pub struct Served {
    pub base: String,
    pub db: TestDatabase,
    pub client: Client,
    pub http: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves a dashboard with [`TOKEN`] (named `ops`), changed by `configure`.
pub async fn serve(configure: impl FnOnce(Dashboard) -> Dashboard) -> Served {
    let db = TestDatabase::new().await.expect("test database");
    let client = db.client().await.expect("client");
    let token = Token::new("ops", TOKEN).expect("token");
    let router = configure(Dashboard::new(client.clone()).token(token)).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .expect("http client");
    Served {
        base,
        db,
        client,
        http,
        task,
    }
}

impl Served {
    /// `method path` with the bearer token and, when given, a JSON body: (status, body).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let request = self
            .http
            .request(
                method.parse().expect("method"),
                format!("{}{path}", self.base),
            )
            .bearer_auth(TOKEN);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    /// GET with the token.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    /// POST with the token and a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body)).await
    }

    /// Sets `state` on job `id` directly (a finished state gets finished_at = now()).
    pub async fn set_state(&self, id: i64, state: &str) {
        let conn = self.client.database().conn().await.expect("conn");
        conn.execute(
            "UPDATE remuda.jobs SET state = $2::text::remuda.job_state, attempt = 1,
                    started_at = now(), worker_id = CASE WHEN $2 = 'running' THEN 'w-1-x' END,
                    finished_at = CASE WHEN $2 IN ('completed', 'failed', 'cancelled', 'expired')
                                       THEN now() END
             WHERE id = $1",
            &[&id, &state],
        )
        .await
        .expect("set state");
    }
}

/// The error code of an error body.
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("(no error code)")
}

//! One webhook delivery: a `POST` of the stored body with the Standard Webhooks headers
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature`), redirects not followed, within
//! the configured timeout. A 2xx answer delivers it; 410 Gone and a refused target end it;
//! anything else is tried again, after the `Retry-After` of a 429 or 503 when it gives one.

use super::dispatcher::Attempt;
use super::{guard, NotificationConfig};
use std::time::Duration;

/// Longest `Retry-After` honoured: a receiver cannot park a notification for longer.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Most bytes of a receiver's answer kept in `last_error`.
const ERROR_BODY: usize = 300;

/// The HTTP client of one dispatcher.
pub(crate) fn client(config: &NotificationConfig) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(config.timeout)
        .connect_timeout(config.timeout)
        .redirect(reqwest::redirect::Policy::none())
        // no proxy from the environment (HTTP_PROXY …): a proxy resolves and connects for
        // us, and the private-address check would see only the proxy
        .no_proxy()
        // a request's body written after its headers must not wait for the receiver's
        // delayed ACK (Nagle): 40 ms a request on Linux
        .tcp_nodelay(true)
        .dns_resolver(guard::resolver(config))
        .user_agent(concat!("remuda/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The trace context a job's notification carries (`data.traceparent`), checked again: the
/// body is the database's, and a header must not take what is not a traceparent.
fn traceparent_of(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let traceparent = value.get("data")?.get("traceparent")?.as_str()?;
    crate::TraceContext::parse(traceparent, None)
        .ok()
        .map(|t| t.traceparent)
}

/// Sends `body` to `target` as notification `id`.
pub(crate) async fn send(
    http: &reqwest::Client,
    config: &NotificationConfig,
    id: i64,
    target: &str,
    body: &str,
) -> Attempt {
    let url = match reqwest::Url::parse(target) {
        Ok(url) => url,
        Err(e) => return Attempt::Dead(format!("the webhook URL does not parse: {e}")),
    };
    if let Err(refused) = guard::check_url(config, &url) {
        return Attempt::Dead(refused.0);
    }
    let message_id = format!("msg_{id}");
    let timestamp = chrono::Utc::now().timestamp();
    let signature =
        super::secret::signatures(&config.secrets, &message_id, timestamp, body.as_bytes());
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &message_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature);
    if let Some(traceparent) = traceparent_of(body) {
        request = request.header("traceparent", traceparent);
    }
    let request = request.body(body.to_string());
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => {
            if let Some(refused) = guard::refusal_in(&e) {
                return Attempt::Dead(refused);
            }
            return Attempt::Failed {
                error: describe(&e),
                retry_after: None,
            };
        }
    };
    let status = response.status();
    if status.is_success() {
        return Attempt::Sent;
    }
    let retry_after = match status.as_u16() {
        429 | 503 => response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after),
        _ => None,
    };
    let text = body_start(response).await;
    let mut error = format!("HTTP {status}");
    let snippet: String = text.trim().chars().take(ERROR_BODY).collect();
    if !snippet.is_empty() {
        error.push_str(": ");
        error.push_str(&snippet);
    }
    if status.as_u16() == 410 {
        return Attempt::Dead(format!("{error} (the receiver is gone: not tried again)"));
    }
    Attempt::Failed { error, retry_after }
}

/// The first [`ERROR_BODY`] bytes of an answer's body (a receiver cannot make the worker
/// read more).
async fn body_start(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(ERROR_BODY);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A request error in words, with its causes.
fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    format!("{what}: {}", crate::error_chain(error))
}

/// `Retry-After` as seconds or an HTTP date, capped at a day.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    crate::retry::retry_after(value).map(|wait| wait.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date_and_is_capped_at_a_day() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}

//! HTTP tasks: POST the job as JSON to a URL. A 2xx answer is ok with the body as the result
//! (JSON if it parses, else text). 408, 429, 5xx and connection failures are errors the retry
//! policy may retry (`HTTP_<status>`, `HTTP_CONNECT`, `HTTP_ERROR`); any other status is a
//! permanent error: the request itself is wrong and sending it again will not help.

use super::{job_document, output_to_json};
use futures_util::future::BoxFuture;
use remuda::{DynTask, JobContext, Jsonb, TaskError};
use std::sync::Arc;

/// Characters of an error response body kept in the error message.
const BODY_IN_MESSAGE: usize = 2000;

/// Longest the client waits for a TCP (and TLS) connection to the endpoint: an address that
/// drops packets fails with `HTTP_CONNECT` in seconds, whatever the task's timeout.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Longest a request of an attempt without a timeout (neither the job's nor its kind's) may
/// take, headers and body: an endpoint that never answers fails the attempt with
/// `HTTP_ERROR` instead of holding its slot forever. An attempt with a timeout is limited by
/// that instead.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// An endpoint called once per job.
pub struct HttpTask {
    /// Where to POST.
    pub url: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Shared connection pool.
    pub client: reqwest::Client,
    /// Largest response body accepted as a result.
    pub max_output: usize,
}

impl DynTask for HttpTask {
    fn run(
        self: Arc<Self>,
        ctx: JobContext,
        args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>> {
        Box::pin(async move { self.call(ctx, args).await })
    }
}

impl HttpTask {
    async fn call(&self, ctx: JobContext, args: Jsonb) -> Result<Jsonb, TaskError> {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("x-remuda-job-id", ctx.id.to_string())
            .header("x-remuda-attempt", ctx.attempt.to_string());
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        // the job's fair-share group, as a command task's REMUDA_JOB_GROUP: what the endpoint
        // enqueues for it can stay in the tenant's group
        if let Some(group) = &ctx.group {
            request = request.header("x-remuda-job-group", percent_encoded(group));
        }
        if let Some(trace) = &ctx.trace {
            request = request.header("traceparent", &trace.traceparent);
            if let Some(state) = &trace.tracestate {
                request = request.header("tracestate", state);
            }
        }
        request = request.timeout(ctx.timeout.unwrap_or(REQUEST_TIMEOUT));
        let mut response = request
            .body(job_document(&ctx, &args))
            .send()
            .await
            .map_err(|e| {
                let code = if e.is_connect() {
                    "HTTP_CONNECT"
                } else {
                    "HTTP_ERROR"
                };
                TaskError::new(
                    code,
                    format!("POST {} failed: {}", self.url, remuda::error_chain(&e)),
                )
            })?;
        let status = response.status();
        let mut body = Vec::new();
        let mut too_large = false;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > self.max_output {
                        too_large = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(TaskError::new(
                        "HTTP_ERROR",
                        format!(
                            "reading the answer of {} failed: {}",
                            self.url,
                            remuda::error_chain(&e)
                        ),
                    ))
                }
            }
        }
        if status.is_success() {
            if too_large {
                return Err(TaskError::permanent(
                    "RESULT_TOO_LARGE",
                    format!(
                        "the answer of {} is larger than the result limit of {} bytes",
                        self.url, self.max_output
                    ),
                ));
            }
            let text = std::str::from_utf8(&body).map_err(|e| {
                TaskError::permanent(
                    "RESULT_NOT_UTF8",
                    format!(
                        "{} answered {status} with a body that is not UTF-8 ({e}); a result must be JSON or UTF-8 text",
                        self.url
                    ),
                )
            })?;
            return Ok(output_to_json(text));
        }
        let text = String::from_utf8_lossy(&body);
        let code = format!("HTTP_{}", status.as_u16());
        let excerpt: String = text.chars().take(BODY_IN_MESSAGE).collect();
        let message = format!("POST {} answered {status}: {}", self.url, excerpt.trim());
        let data = serde_json::json!({ "status": status.as_u16() });
        let retryable =
            status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error();
        Err(if retryable {
            TaskError::new(code, message).with_data(data)
        } else {
            TaskError::permanent(code, message).with_data(data)
        })
    }
}

/// `text` percent-encoded (its UTF-8 bytes; letters, digits and `-._~` as they are): a header
/// carries it unchanged through every server, which may trim spaces or read bytes past ASCII
/// as Latin-1.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_group_is_sent_percent_encoded_with_letters_digits_and_unreserved_marks_as_they_are() {
        assert_eq!(super::percent_encoded("acme-1_b.c~"), "acme-1_b.c~");
        assert_eq!(super::percent_encoded(" åcme/co"), "%20%C3%A5cme%2Fco");
    }
}

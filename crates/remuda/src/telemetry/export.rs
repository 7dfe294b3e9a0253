//! The sending side of span export: a task of its own that gathers finished attempts' spans
//! into batches and POSTs each to the collector (OTLP/HTTP, protobuf, gzipped if asked),
//! retrying what the protocol says to retry, and counting every span as exported, dropped
//! or failed (`remuda_spans_*_total`).
//!
//! Retries follow the OTLP specification: 429, 502, 503 and 504, and a collector that cannot
//! be reached or does not answer in time, are tried again after a backoff (1 s, then half as
//! long again each time: 1.5, 2.25, 3.4 s, with jitter; or the wait `Retry-After` asks,
//! at most 30 s), up to five tries; anything else is a failure at once. Spans that come
//! meanwhile wait in the queue. When the worker stops, what is left (the queue, a batch
//! waiting to be tried again, a request still in flight) gets until the worker's deadline,
//! sent side by side (16 batches at a time); whatever the collector has not answered for by
//! then is said, with its count.

use super::settings::Settings;
use super::span::request;
use crate::metrics::SpanCounts;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Tries of one batch, the first included.
const TRIES: u32 = 5;
/// The first wait before a batch is tried again; each next one is half as long again.
const BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Batches a stop sends at once.
const FLUSH_AT_ONCE: usize = 16;
/// The last spans' time when the worker went away without setting a deadline.
const FLUSH_UNSET: Duration = Duration::from_secs(5);
/// Longest wait a collector's `Retry-After` gets.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// The wait a collector's answer asks before the next try (`Retry-After`: seconds or an HTTP
/// date), capped.
fn asked_wait(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::retry::retry_after)
        .map(|wait| wait.min(MAX_RETRY_AFTER))
}

/// When the worker stops: `None` while it runs, then the moment by which the last spans
/// must have gone.
pub(crate) type Closing = watch::Receiver<Option<Instant>>;

/// The HTTP side: one client, the settings, the counts.
pub(super) struct Exporter {
    pub client: reqwest::Client,
    pub settings: Settings,
    pub counts: SpanCounts,
}

/// How one request went.
enum Answer {
    Taken {
        rejected: i64,
        message: String,
    },
    /// Worth trying again, after at least this long if the collector said.
    Retry {
        why: String,
        after: Option<Duration>,
    },
    Refused(String),
}

impl Exporter {
    /// Builds the HTTP client (with the certificates the settings name); `Err` says why it
    /// cannot be.
    pub(super) fn new(settings: Settings, counts: SpanCounts) -> Result<Exporter, String> {
        let mut builder = reqwest::Client::builder().timeout(settings.timeout);
        if let Some(path) = &settings.certificate {
            let pem = std::fs::read(path).map_err(|e| {
                format!("OTEL_EXPORTER_OTLP_CERTIFICATE {path:?} cannot be read: {e}")
            })?;
            let roots = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!("OTEL_EXPORTER_OTLP_CERTIFICATE {path:?} is not PEM certificates: {e}")
            })?;
            for root in roots {
                builder = builder.add_root_certificate(root);
            }
        }
        if let Some((cert, key)) = &settings.identity {
            let mut pem = std::fs::read(cert).map_err(|e| {
                format!("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE {cert:?} cannot be read: {e}")
            })?;
            pem.push(b'\n');
            pem.extend(std::fs::read(key).map_err(|e| {
                format!("OTEL_EXPORTER_OTLP_CLIENT_KEY {key:?} cannot be read: {e}")
            })?);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                format!("the client certificate {cert:?} and key {key:?} are not a PEM certificate and its key: {e}")
            })?;
            builder = builder.identity(identity);
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Exporter {
            client,
            settings,
            counts,
        })
    }

    /// Sends the spans of `rx` in batches until the worker stops (`closing`), then the rest.
    pub(super) async fn run(self, mut rx: mpsc::Receiver<Span>, mut closing: Closing) {
        let mut warned = false;
        loop {
            let first = tokio::select! {
                span = rx.recv() => span,
                _ = stopped(&mut closing) => None,
            };
            let Some(first) = first else {
                let lost = self.flush(rx, closing).await;
                return self.say_lost(lost);
            };
            let mut batch = vec![first];
            let linger = Instant::now() + self.settings.linger;
            while batch.len() < self.settings.batch {
                tokio::select! {
                    span = rx.recv() => match span {
                        Some(span) => batch.push(span),
                        None => break,
                    },
                    _ = tokio::time::sleep_until(linger) => break,
                    _ = stopped(&mut closing) => break,
                }
            }
            let delivery = self.by_deadline(batch, &mut warned, closing.clone());
            tokio::pin!(delivery);
            let mut stop = closing.clone();
            tokio::select! {
                biased;
                _ = stopped(&mut stop) => {
                    // the stop came: a request in flight goes on beside the rest, until the
                    // deadline
                    let (lost, rest) = tokio::join!(delivery, self.flush(rx, closing));
                    return self.say_lost(lost + rest);
                }
                _ = &mut delivery => {}
            }
        }
    }

    /// At the worker's stop: everything left, sent at once in batches, each tried until the
    /// deadline; returns how many spans did not go.
    async fn flush(&self, mut rx: mpsc::Receiver<Span>, closing: Closing) -> u64 {
        rx.close();
        let mut spans = Vec::new();
        while let Ok(span) = rx.try_recv() {
            spans.push(span);
        }
        let mut batches = Vec::new();
        while !spans.is_empty() {
            let rest = spans.split_off(spans.len().min(self.settings.batch));
            batches.push(spans);
            spans = rest;
        }
        let sends = batches.into_iter().map(|batch| {
            let closing = closing.clone();
            async move {
                let mut warned = false;
                self.by_deadline(batch, &mut warned, closing).await
            }
        });
        use futures_util::StreamExt;
        futures_util::stream::iter(sends)
            .buffer_unordered(FLUSH_AT_ONCE)
            .fold(0, |lost, n| async move { lost + n })
            .await
    }

    /// One batch delivered, cut short at the stop's deadline once the worker stops; returns
    /// how many of its spans that left unsent (counted as failed).
    async fn by_deadline(&self, batch: Vec<Span>, warned: &mut bool, mut closing: Closing) -> u64 {
        let n = batch.len() as u64;
        tokio::select! {
            _ = self.deliver(batch, warned) => 0,
            _ = deadline(&mut closing) => {
                self.counts.failed.inc_by(n);
                n
            }
        }
    }

    fn say_lost(&self, lost: u64) {
        if lost > 0 {
            tracing::warn!(
                "remuda telemetry: {lost} spans not exported: the collector at {} had not taken them by the worker's stop deadline",
                self.settings.url
            );
        }
    }

    /// Sends one batch, trying again as the protocol allows; counts how it went.
    async fn deliver(&self, batch: Vec<Span>, warned: &mut bool) {
        let n = batch.len() as u64;
        let body = match self.body(batch) {
            Ok(body) => bytes::Bytes::from(body),
            Err(e) => {
                self.counts.failed.inc_by(n);
                tracing::warn!("remuda telemetry: {n} spans not exported: {e}");
                return;
            }
        };
        let mut wait = BACKOFF;
        for tried in 1..=TRIES {
            match self.post(body.clone()).await {
                Answer::Taken { rejected, message } => {
                    let rejected = u64::try_from(rejected).unwrap_or(0).min(n);
                    self.counts.exported.inc_by(n - rejected);
                    if rejected > 0 {
                        self.counts.failed.inc_by(rejected);
                        tracing::warn!("remuda telemetry: the collector rejected {rejected} of {n} spans: {message}");
                    }
                    *warned = false;
                    return;
                }
                Answer::Refused(why) => {
                    self.counts.failed.inc_by(n);
                    self.say(warned, format!("{n} spans not exported: {why}"));
                    return;
                }
                Answer::Retry { why, .. } if tried == TRIES => {
                    self.counts.failed.inc_by(n);
                    self.say(
                        warned,
                        format!("{n} spans not exported after {TRIES} tries: {why}"),
                    );
                    return;
                }
                Answer::Retry { why, after } => {
                    tracing::debug!("remuda telemetry: {n} spans to be sent again: {why}");
                    let jitter = wait.mul_f64(fastrand::f64() * 0.2);
                    tokio::time::sleep(after.unwrap_or(wait + jitter)).await;
                    wait = (wait * 3 / 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// A failure said once, until an export goes through again (the rest at debug).
    fn say(&self, warned: &mut bool, what: String) {
        if *warned {
            tracing::debug!("remuda telemetry: {what}");
        } else {
            tracing::warn!("remuda telemetry: {what}");
            *warned = true;
        }
    }

    /// The request body: the batch encoded, gzipped if asked.
    fn body(&self, batch: Vec<Span>) -> std::io::Result<Vec<u8>> {
        let encoded = request(&self.settings.resource, batch).encode_to_vec();
        if !self.settings.gzip {
            return Ok(encoded);
        }
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&encoded)?;
        gz.finish()
    }

    async fn post(&self, body: bytes::Bytes) -> Answer {
        let mut request = self
            .client
            .post(&self.settings.url)
            .header("content-type", "application/x-protobuf");
        if self.settings.gzip {
            request = request.header("content-encoding", "gzip");
        }
        for (name, value) in &self.settings.headers {
            request = request.header(name, value);
        }
        let response = match request.body(body).send().await {
            Ok(response) => response,
            Err(e) if e.is_builder() => {
                return Answer::Refused(format!("the request cannot be made: {e}"))
            }
            Err(e) => {
                return Answer::Retry {
                    why: format!("{}: {e}", self.settings.url),
                    after: None,
                }
            }
        };
        let status = response.status();
        let after = asked_wait(response.headers());
        let body = response.bytes().await.unwrap_or_default();
        if status.is_success() {
            let partial = ExportTraceServiceResponse::decode(body.as_ref())
                .ok()
                .and_then(|r| r.partial_success)
                .unwrap_or_default();
            return Answer::Taken {
                rejected: partial.rejected_spans,
                message: partial.error_message,
            };
        }
        let why = format!("the collector at {} answered {status}", self.settings.url);
        match status.as_u16() {
            429 | 502 | 503 | 504 => Answer::Retry { why, after },
            _ => Answer::Refused(why),
        }
    }
}

/// Once the worker has begun to stop (or is gone).
async fn stopped(closing: &mut Closing) {
    let _ = closing.wait_for(Option::is_some).await;
}

/// The moment the worker's stop sets, once it is set (a few seconds from now if the worker
/// went away without one).
async fn deadline(closing: &mut Closing) {
    let until = closing
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|d| *d)
        .unwrap_or_else(|| Instant::now() + FLUSH_UNSET);
    tokio::time::sleep_until(until).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

    fn asking(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).expect("a header"));
        asked_wait(&headers)
    }

    #[test]
    fn a_collectors_retry_after_is_read_as_seconds_or_a_date_and_capped() {
        assert_eq!(asking("3"), Some(Duration::from_secs(3)));
        assert_eq!(asking("3600"), Some(MAX_RETRY_AFTER));
        let soon = (chrono::Utc::now() + chrono::Duration::seconds(10)).to_rfc2822();
        let wait = asking(&soon).expect("a date");
        assert!(
            wait > Duration::from_secs(8) && wait <= Duration::from_secs(10),
            "{wait:?}"
        );
        assert_eq!(
            asking("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(asking("later"), None);
        assert_eq!(asked_wait(&HeaderMap::new()), None);
    }
}

//! Where and how spans are sent, read once at a worker's start from `[telemetry]` and the
//! standard `OTEL_*` variables of the OTLP exporter, the batch span processor and the sampler
//! (<https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/>).
//!
//! A setting that cannot work (an endpoint that is not an http(s) URL, OTLP over gRPC) stops
//! the export; one that is only malformed (a compression, timeout or sampler nobody knows) is
//! warned about and its default used, as the specification asks.

use super::sampler::Sampler;
use super::TelemetryConfig;
use std::time::Duration;

/// Longest a request waits for the collector, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Spans waiting to be sent, unless `OTEL_BSP_MAX_QUEUE_SIZE` says; beyond it new ones are
/// dropped.
const QUEUE: usize = 8192;
/// Largest queue accepted (the specification's range of sizes).
const MAX_QUEUE: usize = i32::MAX as usize;
/// Most spans per request, unless `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` says.
const BATCH: usize = 512;
/// Longest a span waits for its batch to fill, unless `OTEL_BSP_SCHEDULE_DELAY` says.
const LINGER: Duration = Duration::from_millis(500);

/// An `OTEL_*` variable that is set and not blank.
pub(super) fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The signal-specific variable (`OTEL_EXPORTER_OTLP_TRACES_X`) if set, else the general one.
fn otlp(what: &str) -> Option<(String, String)> {
    let traces = format!("OTEL_EXPORTER_OTLP_TRACES_{what}");
    let general = format!("OTEL_EXPORTER_OTLP_{what}");
    env(&traces)
        .map(|v| (traces, v))
        .or_else(|| env(&general).map(|v| (general, v)))
}

/// Everything the exporter needs, resolved.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub url: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`, the traces' own taking precedence).
    pub headers: Vec<(String, String)>,
    /// Whether bodies are gzipped (`OTEL_EXPORTER_OTLP_COMPRESSION=gzip`).
    pub gzip: bool,
    /// Longest one request waits.
    pub timeout: Duration,
    /// A PEM file of certificate authorities trusted for an https endpoint, beside the
    /// usual roots (`OTEL_EXPORTER_OTLP_CERTIFICATE`).
    pub certificate: Option<String>,
    /// A PEM client certificate and key for mutual TLS (`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`,
    /// `…_CLIENT_KEY`).
    pub identity: Option<(String, String)>,
    pub queue: usize,
    pub batch: usize,
    pub linger: Duration,
    pub sampler: Sampler,
    /// The resource's attributes: `service.name` first.
    pub resource: Vec<(String, String)>,
}

impl Settings {
    /// The settings, with the warnings of what was malformed and set aside; `Err` says why
    /// spans cannot be exported at all.
    pub(crate) fn resolve(config: &TelemetryConfig) -> Result<(Settings, Vec<String>), String> {
        let mut warnings = Vec::new();
        let url = url(config)?;
        let headers = headers(&mut warnings);
        if let Some((name, value)) = headers.iter().find(|(k, v)| {
            reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(v).is_err()
        }) {
            return Err(format!(
                "the header {name:?}: {value:?} of OTEL_EXPORTER_OTLP_HEADERS cannot be sent (a header name is a token, a value has no control characters)"
            ));
        }
        let gzip = match otlp("COMPRESSION") {
            None => false,
            Some((_, v)) if v.eq_ignore_ascii_case("gzip") => true,
            Some((_, v)) if v.eq_ignore_ascii_case("none") => false,
            Some((name, v)) => {
                warnings.push(format!(
                    "{name}={v:?} is not a compression remuda knows (gzip or none): spans are sent uncompressed"
                ));
                false
            }
        };
        let timeout = otlp("TIMEOUT")
            .and_then(|(name, v)| millis(&name, &v, &mut warnings))
            .unwrap_or(TIMEOUT);
        let identity = match (otlp("CLIENT_CERTIFICATE"), otlp("CLIENT_KEY")) {
            (Some((_, cert)), Some((_, key))) => Some((cert, key)),
            (None, None) => None,
            (Some((name, _)), None) | (None, Some((name, _))) => {
                return Err(format!(
                    "{name} is set without its pair (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together)"
                ))
            }
        };
        let count = |name: &str, default: usize, warnings: &mut Vec<String>| {
            env(name)
                .and_then(|v| match v.parse::<usize>() {
                    Ok(n) if n > 0 && n <= MAX_QUEUE => Some(n),
                    _ => {
                        warnings.push(format!(
                            "{name}={v:?} is not a count from 1 to {MAX_QUEUE}: {default} is used"
                        ));
                        None
                    }
                })
                .unwrap_or(default)
        };
        let queue = count("OTEL_BSP_MAX_QUEUE_SIZE", QUEUE, &mut warnings);
        let batch = count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", BATCH, &mut warnings).min(queue);
        let linger = env("OTEL_BSP_SCHEDULE_DELAY")
            .and_then(|v| millis("OTEL_BSP_SCHEDULE_DELAY", &v, &mut warnings))
            .unwrap_or(LINGER);
        let sampler = Sampler::from_env(&mut warnings);
        Ok((
            Settings {
                url,
                headers,
                gzip,
                timeout,
                certificate: otlp("CERTIFICATE").map(|(_, v)| v),
                identity,
                queue,
                batch,
                linger,
                sampler,
                resource: resource(config, &mut warnings),
            },
            warnings,
        ))
    }
}

/// A duration in whole milliseconds, as the `OTEL_*` variables give them.
fn millis(name: &str, value: &str, warnings: &mut Vec<String>) -> Option<Duration> {
    match value.parse::<u64>() {
        Ok(ms) => Some(Duration::from_millis(ms)),
        Err(_) => {
            warnings.push(format!(
                "{name}={value:?} is not a whole number of milliseconds: the default is used"
            ));
            None
        }
    }
}

/// The URL spans go to: `[telemetry] endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` with
/// `/v1/traces` added, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given.
fn url(config: &TelemetryConfig) -> Result<String, String> {
    let (what, url) = if let Some(base) = config.endpoint() {
        ("[telemetry] endpoint", traces_path(base))
    } else if let Some(full) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", full)
    } else if let Some(base) = env("OTEL_EXPORTER_OTLP_ENDPOINT") {
        ("OTEL_EXPORTER_OTLP_ENDPOINT", traces_path(&base))
    } else {
        return Err("no endpoint is set".into());
    };
    let ok = url::Url::parse(&url)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    if !ok {
        return Err(format!(
            "{what} {url:?} is not an http:// or https:// URL (such as http://collector:4318)"
        ));
    }
    match otlp("PROTOCOL") {
        None => Ok(url),
        Some((_, p)) if p.eq_ignore_ascii_case("http/protobuf") => Ok(url),
        Some((_, other)) => Err(format!(
            "the OTLP protocol {other:?} is not supported: remuda exports over http/protobuf (port 4318)"
        )),
    }
}

fn traces_path(base: &str) -> String {
    format!("{}/v1/traces", base.trim().trim_end_matches('/'))
}

/// `key=value` pairs separated by commas, values percent-decoded (the W3C baggage form the
/// `OTEL_*` lists use); a pair without `=` is warned about and skipped.
fn pairs(name: &str, text: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .filter_map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Some((k.trim().to_string(), percent_decoded(v.trim())))
            }
            _ => {
                warnings.push(format!("{name}: {pair:?} is not key=value: skipped"));
                None
            }
        })
        .collect()
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The request headers: the general list, then the traces' own (a key in both: the traces').
fn headers(warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = Vec::new();
    for name in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    ] {
        for (k, v) in env(name)
            .map(|t| pairs(name, &t, warnings))
            .unwrap_or_default()
        {
            headers.retain(|(old, _)| !old.eq_ignore_ascii_case(&k));
            headers.push((k, v));
        }
    }
    headers
}

/// The resource: `service.name` (`[telemetry] service_name`, else `OTEL_SERVICE_NAME`, else
/// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else `remuda`), then the other attributes of
/// `OTEL_RESOURCE_ATTRIBUTES`, then the SDK's own.
fn resource(config: &TelemetryConfig, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let given = env("OTEL_RESOURCE_ATTRIBUTES")
        .map(|t| pairs("OTEL_RESOURCE_ATTRIBUTES", &t, warnings))
        .unwrap_or_default();
    let service = config
        .service_name
        .clone()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| env("OTEL_SERVICE_NAME"))
        .or_else(|| {
            given
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| "remuda".into());
    let mut resource = vec![("service.name".to_string(), service)];
    resource.extend(
        given
            .into_iter()
            .filter(|(k, _)| k != "service.name" && !k.starts_with("telemetry.sdk.")),
    );
    resource.extend([
        ("telemetry.sdk.name".into(), "remuda".into()),
        ("telemetry.sdk.language".into(), "rust".into()),
        (
            "telemetry.sdk.version".into(),
            env!("CARGO_PKG_VERSION").into(),
        ),
    ]);
    resource
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_split_trimmed_and_percent_decoded_and_a_pair_without_equals_is_said() {
        let mut warnings = Vec::new();
        let got = pairs(
            "X",
            " api-key = a%2Cb%3D ,broken, team=ops%20one,",
            &mut warnings,
        );
        assert_eq!(
            got,
            [
                ("api-key".to_string(), "a,b=".to_string()),
                ("team".to_string(), "ops one".to_string())
            ]
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("\"broken\""), "{warnings:?}");
        assert_eq!(percent_decoded("100%"), "100%", "a lone % stays");
    }

    #[test]
    fn an_endpoint_that_is_not_an_http_url_is_a_problem_said_before_anything_is_sent() {
        let bad = TelemetryConfig {
            endpoint: Some("collector:4318".into()),
            ..TelemetryConfig::default()
        };
        let problem = url(&bad).expect_err("a problem");
        assert!(
            problem.contains("not an http:// or https:// URL"),
            "{problem}"
        );
        let good = TelemetryConfig {
            endpoint: Some("http://127.0.0.1:4318/".into()),
            ..TelemetryConfig::default()
        };
        assert_eq!(url(&good).as_deref(), Ok("http://127.0.0.1:4318/v1/traces"));
    }
}

//! Email notifications: a plain-text message over SMTP (STARTTLS, TLS or none) that says
//! which job or workflow run ended, how, and its result or error, truncated when long.

use super::dispatcher::Attempt;
use super::{SmtpConfig, SmtpTls};
use lettre::message::{Mailbox, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::Value;
use std::time::Duration;

/// Longest result or error shown in a message, in characters.
const MAX_DETAIL: usize = 8_000;

/// The SMTP transport of one dispatcher (it keeps a small pool of connections).
pub(crate) type Transport = AsyncSmtpTransport<Tokio1Executor>;

/// Builds the transport for `smtp`.
pub(crate) fn transport(smtp: &SmtpConfig, timeout: Duration) -> Result<Transport, String> {
    let builder = match smtp.tls {
        SmtpTls::Starttls => Transport::starttls_relay(&smtp.host).map_err(|e| e.to_string())?,
        SmtpTls::Tls => Transport::relay(&smtp.host).map_err(|e| e.to_string())?,
        SmtpTls::None => Transport::builder_dangerous(&smtp.host),
    };
    let mut builder = builder.port(smtp.port()).timeout(Some(timeout));
    if let Some(user) = &smtp.username {
        builder = builder.credentials(Credentials::new(
            user.clone(),
            smtp.password.clone().unwrap_or_default(),
        ));
    }
    Ok(builder.build())
}

/// Sends notification `id` (whose `body` is the webhook's JSON) to `to`.
pub(crate) async fn send(
    transport: Option<&Transport>,
    smtp: Option<&SmtpConfig>,
    id: i64,
    to: &str,
    body: &str,
) -> Attempt {
    let (Some(transport), Some(smtp)) = (transport, smtp) else {
        return Attempt::Failed {
            error: "no SMTP server is configured ([notifications.smtp]): emails cannot be sent"
                .into(),
            retry_after: None,
        };
    };
    let message = match compose(&smtp.from, to, id, body) {
        Ok(message) => message,
        Err(e) => return Attempt::Dead(e),
    };
    match transport.send(message).await {
        Ok(_) => Attempt::Sent,
        Err(e) if e.is_permanent() => Attempt::Dead(format!("the SMTP server refused it: {e}")),
        Err(e) => Attempt::Failed {
            error: format!("SMTP: {e}"),
            retry_after: None,
        },
    }
}

/// The message for notification `id`: a MIME text part (UTF-8), dated, with a Message-ID of
/// the sender's domain that stays the same when a failed send is tried again (see
/// [`fingerprint`]), so a receiver can tell a retry from a second message (mail without these
/// headers is refused or marked as spam by some servers).
fn compose(from: &str, to: &str, id: i64, body: &str) -> Result<Message, String> {
    let from: Mailbox = from
        .parse()
        .map_err(|e| format!("the sender address {from:?} is not valid: {e}"))?;
    let to: Mailbox = to
        .parse()
        .map_err(|e| format!("the address {to:?} is not valid: {e}"))?;
    let event: Value = serde_json::from_str(body).map_err(|e| format!("unreadable body: {e}"))?;
    let (subject, text) = describe(&event);
    let message_id = format!(
        "<remuda.notification.{id}.{}@{}>",
        fingerprint(body),
        from.email.domain()
    );
    Message::builder()
        .from(from)
        .to(to)
        .subject(subject)
        .date_now()
        .message_id(Some(message_id))
        .singlepart(SinglePart::plain(text))
        .map_err(|e| format!("cannot build the message: {e}"))
}

/// 16 hex digits of the body's SHA-256: the same on every retry of a notification, different
/// between two databases whose notification ids meet (staging and production sending from one
/// domain, or a database made again), so a receiver that drops repeated Message-IDs keeps both.
fn fingerprint(body: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(body.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The subject and the text of a notification event.
pub(crate) fn describe(event: &Value) -> (String, String) {
    let data = &event["data"];
    let kind_of = event["type"].as_str().unwrap_or("job.unknown");
    let state = data["state"].as_str().unwrap_or("ended");
    let id = &data["id"];
    let mut text = String::new();
    let subject = if kind_of.starts_with("workflow.") {
        let name = data["name"].as_str().unwrap_or("?");
        text.push_str(&format!("Workflow run {id} ({name}) {state}.\n\n"));
        line(&mut text, "Run", id);
        line(&mut text, "Name", &data["name"]);
        format!("remuda: workflow run {id} ({name}) {state}")
    } else {
        let kind = data["kind"].as_str().unwrap_or("?");
        text.push_str(&format!("Job {id} ({kind}) {state}.\n\n"));
        line(&mut text, "Job", id);
        line(&mut text, "Kind", &data["kind"]);
        line(&mut text, "Queue", &data["queue"]);
        line(&mut text, "Attempt", &data["attempt"]);
        line(&mut text, "Workflow run", &data["workflow_id"]);
        line(&mut text, "Node", &data["node"]);
        format!("remuda: job {id} ({kind}) {state}")
    };
    line(&mut text, "State", &data["state"]);
    line(&mut text, "Created", &data["created_at"]);
    line(&mut text, "Finished", &data["finished_at"]);
    for (title, key) in [
        ("Result", "result"),
        ("Output", "output"),
        ("Error", "error"),
    ] {
        if !data[key].is_null() {
            text.push('\n');
            text.push_str(title);
            text.push_str(":\n");
            text.push_str(&detail(&data[key]));
            text.push('\n');
        }
    }
    (subject, text)
}

fn line(text: &mut String, title: &str, value: &Value) {
    let shown = match value {
        Value::Null => return,
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text.push_str(&format!("{title}: {shown}\n"));
}

/// A result or error as indented JSON, cut at [`MAX_DETAIL`] characters with a note.
fn detail(value: &Value) -> String {
    let full = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let count = full.chars().count();
    if count <= MAX_DETAIL {
        return full;
    }
    let kept: String = full.chars().take(MAX_DETAIL).collect();
    format!(
        "{kept}\n… (truncated: {} more characters; `remuda job ID` shows all of it)",
        count - MAX_DETAIL
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_is_cut_with_a_note() {
        let event = serde_json::json!({
            "type": "job.completed",
            "data": {"id": 7, "kind": "report", "state": "completed", "result": "x".repeat(20_000)}
        });
        let (subject, text) = describe(&event);
        assert_eq!(subject, "remuda: job 7 (report) completed");
        assert!(text.contains("(truncated: 12002 more characters"), "{text}");
        assert!(text.len() < 9_000);
    }
}

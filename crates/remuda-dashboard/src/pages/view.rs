//! What every page handler needs: who is looking (for the CSRF field and read-only mode),
//! where the page is (for relative links), the flash message of the last action, and forms
//! for actions.

use super::html::{esc, layout, url, Frame};
use crate::auth::Principal;
use crate::State;
use axum::http::Uri;
use axum::response::{Html, IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// The page being drawn.
pub struct Ctx {
    /// The session's CSRF token.
    pub csrf: Option<String>,
    /// Whether changes are refused.
    pub read_only: bool,
    /// The relative path to the dashboard's root (`./`, `../`, …).
    pub root: String,
}

impl Ctx {
    /// The context of a request for `uri` by `who`.
    pub fn new(state: &State, who: &Principal, uri: &Uri) -> Ctx {
        Ctx {
            csrf: who.csrf.clone(),
            read_only: state.config.read_only,
            root: super::root_of(uri.path()),
        }
    }

    /// The whole page.
    pub fn render(&self, title: &str, section: &str, content: &str) -> Html<String> {
        let frame = Frame {
            title,
            section,
            csrf: self.csrf.as_deref(),
            read_only: self.read_only,
            depth: self.root.matches("../").count(),
        };
        Html(layout(&frame, content))
    }

    /// A link to `path` (relative to the root).
    pub fn href(&self, path: &str) -> String {
        format!("{}{path}", self.root)
    }

    /// A one-button form posting to `path` (relative to the root), with the CSRF field and,
    /// when `confirm` is given, a confirmation first; disabled in read-only mode.
    pub fn button(&self, path: &str, label: &str, confirm: Option<&str>, class: &str) -> String {
        let confirm = confirm
            .map(|q| format!(" data-confirm=\"{}\"", esc(q)))
            .unwrap_or_default();
        let disabled = if self.read_only { " disabled" } else { "" };
        format!(
            "<form method=\"post\" action=\"{}\" class=\"inline\"{confirm}>{}<button class=\"{class}\"{disabled}>{}</button></form>",
            esc(&self.href(path)),
            self.csrf_field(),
            esc(label)
        )
    }

    /// The hidden CSRF field of a form.
    pub fn csrf_field(&self) -> String {
        match &self.csrf {
            Some(csrf) => format!(
                "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
                esc(csrf)
            ),
            None => String::new(),
        }
    }
}

/// The outcome of the last action, carried in the query of the page it returns to.
#[derive(Debug, Default, Deserialize)]
pub struct Flash {
    /// What was done.
    pub notice: Option<String>,
    /// What went wrong.
    pub error: Option<String>,
}

impl Flash {
    /// The message, as HTML.
    pub fn html(&self) -> String {
        let mut out = String::new();
        if let Some(n) = &self.notice {
            out += &format!("<p class=\"notice\" role=\"status\">{}</p>", esc(n));
        }
        if let Some(e) = &self.error {
            out += &format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e));
        }
        out
    }
}

/// Back to `path` (relative to the root `root`) with the outcome of an action.
pub fn back(root: &str, path: &str, outcome: Result<String, String>) -> Response {
    let separator = if path.contains('?') { '&' } else { '?' };
    let (key, text) = match outcome {
        Ok(text) => ("notice", text),
        Err(text) => ("error", text),
    };
    Redirect::to(&format!("{root}{path}{separator}{key}={}", url(&text))).into_response()
}

/// A time for people, in UTC.
pub fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || "–".into(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// A span of seconds for people: `850 ms`, `12.3 s`, `4 min`, `2.5 h`.
pub fn span(seconds: f64) -> String {
    match seconds {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 60.0 => format!("{s:.1} s"),
        s if s < 3600.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// A state as a coloured badge.
pub fn badge(state: &str) -> String {
    format!("<span class=\"badge s-{0}\">{0}</span>", esc(state))
}

/// Pretty JSON in a `<pre>`.
pub fn json_block(value: &serde_json::Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    format!("<pre>{}</pre>", esc(&text))
}

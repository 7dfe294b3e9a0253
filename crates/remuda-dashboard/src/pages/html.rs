//! Writing HTML without a template engine: every value put into a page goes through
//! [`esc`], and every page through [`layout`].

use std::fmt::Write;

/// `text` with the characters that mean something in HTML (text or attribute) escaped.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `value` as a URL query component.
pub fn url(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// The menu: path and label.
const MENU: [(&str, &str); 8] = [
    ("", "Overview"),
    ("jobs", "Jobs"),
    ("queues", "Queues"),
    ("workers", "Workers"),
    ("workflows", "Workflows"),
    ("schedules", "Schedules"),
    ("notifications", "Notifications"),
    ("audit", "Audit"),
];

/// What every page shows around its content.
pub struct Frame<'a> {
    /// The page's title.
    pub title: &'a str,
    /// The menu entry to highlight (a [`MENU`] path).
    pub section: &'a str,
    /// The session's CSRF token, for the logout form (none: not logged in).
    pub csrf: Option<&'a str>,
    /// Whether the dashboard refuses changes.
    pub read_only: bool,
    /// How far below the dashboard's root the page is (links are relative, so the dashboard
    /// works mounted under any path).
    pub depth: usize,
}

impl Frame<'_> {
    /// The relative path to the dashboard's root.
    pub fn root(&self) -> String {
        if self.depth == 0 {
            "./".into()
        } else {
            "../".repeat(self.depth)
        }
    }
}

/// A whole page: head with the stylesheet and script, menu, content.
pub fn layout(frame: &Frame<'_>, content: &str) -> String {
    let root = frame.root();
    let mut menu = String::new();
    for (path, label) in MENU {
        let current = if path == frame.section {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(menu, "<a href=\"{root}{path}\"{current}>{label}</a>");
    }
    let session = match frame.csrf {
        Some(csrf) => format!(
            "<form method=\"post\" action=\"{root}logout\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button>Log out</button></form>",
            esc(csrf)
        ),
        None => String::new(),
    };
    let mode = if frame.read_only {
        "<span class=\"badge\">read-only</span>"
    } else {
        ""
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · remuda</title><link rel=\"stylesheet\" href=\"{root}assets/remuda.css\">\
<script src=\"{root}assets/remuda.js\" defer></script></head>\
<body><header><strong class=\"brand\">remuda</strong><nav>{menu}</nav>{mode}\
<span class=\"live\"><button type=\"button\" id=\"live\" data-state=\"on\">Live: on</button></span>{session}</header>\
<main id=\"main\"><h1>{title}</h1>{content}</main></body></html>",
        title = esc(frame.title),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(url("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}

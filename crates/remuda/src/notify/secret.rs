//! Webhook signing secrets and signatures, as Standard Webhooks defines them: a secret is
//! `whsec_` followed by the base64 of its key bytes; a signature is `v1,` followed by the
//! base64 of HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}").

use crate::{Error, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{KeyInit, Mac};
use std::fmt;
use std::str::FromStr;

/// The prefix of a secret's text.
const PREFIX: &str = "whsec_";
/// Fewest and most key bytes (Standard Webhooks: 24 to 64).
const KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// A signing secret. Shown as `whsec_…` with the key hidden.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: Vec<u8>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(whsec_…, {} bytes)", self.key.len())
    }
}

impl FromStr for Secret {
    type Err = Error;

    /// `whsec_` and the base64 of 24 to 64 random bytes.
    fn from_str(text: &str) -> Result<Secret> {
        let bad = |why: &str| {
            Error::InvalidInput(format!(
                "the webhook secret {why}: it must be whsec_ followed by the base64 of 24 to 64 random bytes (for one: echo whsec_$(head -c 32 /dev/urandom | base64))"
            ))
        };
        let encoded = text
            .trim()
            .strip_prefix(PREFIX)
            .ok_or_else(|| bad("does not start with whsec_"))?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|e| bad(&format!("is not base64 after whsec_ ({e})")))?;
        if !KEY_BYTES.contains(&key.len()) {
            return Err(bad(&format!("holds {} bytes", key.len())));
        }
        Ok(Secret { key })
    }
}

impl Secret {
    /// A new secret of 32 bytes from the system's random source (`/dev/urandom`).
    pub fn random() -> std::io::Result<Secret> {
        use std::io::Read;
        let mut key = vec![0; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
        Ok(Secret { key })
    }

    /// The secret as configuration takes it: `whsec_` and the base64 of its key.
    pub fn to_text(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.key))
    }

    /// The signature of one message: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        // HMAC takes a key of any length: new_from_slice cannot fail for it
        let mut mac = match hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => return String::new(),
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The `webhook-signature` header: one signature per secret, space-separated.
pub(crate) fn signatures(secrets: &[Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    let all: Vec<String> = secrets
        .iter()
        .map(|s| s.sign(id, timestamp, body))
        .collect();
    all.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_matches_the_standard_webhooks_reference_vector() {
        // the example of the Standard Webhooks specification and its libraries' tests
        let secret: Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            .parse()
            .expect("secret");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_random_secret_reads_back_from_its_text() {
        let secret = Secret::random().expect("random");
        assert_eq!(secret.to_text().parse::<Secret>().expect("parses"), secret);
        assert_ne!(Secret::random().expect("random"), secret);
    }

    #[test]
    fn secrets_not_in_whsec_base64_form_are_refused() {
        for (text, wanted) in [
            (
                "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "does not start with whsec_",
            ),
            ("whsec_not*base64", "is not base64"),
            ("whsec_c2hvcnQ=", "holds 5 bytes"),
        ] {
            let err = text.parse::<Secret>().expect_err(text).to_string();
            assert!(err.contains(wanted), "{text}: {err}");
        }
    }
}

//! TLS to PostgreSQL, with libpq's `sslmode` and `sslrootcert` (managed services such as
//! RDS, Cloud SQL, Neon and Supabase require it), for the pool and the listener alike.
//!
//! - `disable`: never TLS.
//! - `prefer` (the default, as in libpq): TLS when the server offers it, the certificate not
//!   checked; plain otherwise.
//! - `require`: TLS or nothing, the certificate not checked (as libpq, unless `sslrootcert` is
//!   given: then as `verify-ca`).
//! - `verify-ca`: TLS, the certificate must chain to a trusted root (`sslrootcert`, a PEM file,
//!   else the Mozilla roots).
//! - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.
//!
//! Connections over a Unix socket never use TLS (PostgreSQL does not offer it there).
//! tokio-postgres itself knows only disable, prefer and require, so the two parameters are
//! taken out of the connection string here, and the verification is rustls's.

use crate::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres::config::SslMode as DriverMode;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS if offered, unchecked.
    #[default]
    Prefer,
    /// TLS or nothing, unchecked (checked as `VerifyCa` with a root certificate).
    Require,
    /// TLS with a certificate that chains to a trusted root.
    VerifyCa,
    /// TLS with a trusted certificate that names the host.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(Error::InvalidInput(format!(
                "invalid sslmode {other:?}: use disable, prefer, require, verify-ca or verify-full"
            )))
            }
        })
    }
}

/// How connections to one database use TLS, with the other setting of the connection string
/// that the driver cannot hold: whether a pooler stands between (`pooler`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tls {
    /// The `sslmode`.
    pub mode: SslMode,
    /// The `sslrootcert`: a PEM file of the certificates to trust.
    pub root_cert: Option<PathBuf>,
    /// `pooler=transaction`: the connections go through a pooler in transaction mode
    /// (see [`super::Pooler`]).
    pub pooler: super::Pooler,
}

/// Parses a connection string (a `postgres://` URL or `key=value` pairs) into the driver's
/// configuration and the TLS settings it cannot hold.
pub fn parse(conninfo: &str) -> Result<(Config, Tls)> {
    let mut tls = Tls::default();
    let rest = take_tls_parameters(conninfo, &mut tls)?;
    let mut config: Config = rest.parse().map_err(|e| {
        Error::InvalidInput(format!(
            "invalid database URL: {e}. Expected postgres://user@host:port/dbname?sslmode=… or host=… dbname=…"
        ))
    })?;
    if tls.mode == SslMode::VerifyCa && tls.root_cert.is_none() {
        return Err(Error::InvalidInput(
            "sslmode=verify-ca needs sslrootcert (the PEM file of the CA that signed the server's certificate): without a root of your own, any publicly issued certificate would pass, whatever name it bears".into(),
        ));
    }
    config.ssl_mode(tls.driver_mode());
    Ok((config, tls))
}

/// Removes `sslmode`, `sslrootcert` and `pooler` from `conninfo`, recording them in `tls`.
fn take_tls_parameters(conninfo: &str, tls: &mut Tls) -> Result<String> {
    let mut take = |key: &str, value: &str| -> Result<bool> {
        match key {
            "sslmode" => tls.mode = SslMode::parse(value)?,
            "sslrootcert" => tls.root_cert = Some(PathBuf::from(value)),
            "pooler" => tls.pooler = value.parse().map_err(Error::InvalidInput)?,
            _ => return Ok(false),
        }
        Ok(true)
    };
    if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        let Some((base, query)) = conninfo.split_once('?') else {
            return Ok(conninfo.to_string());
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(key, &percent_decode(value))? {
                kept.push(pair);
            }
        }
        return Ok(if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        });
    }
    // key=value pairs (values with spaces are quoted; remuda never writes TLS keys so)
    let mut kept = Vec::new();
    for word in split_words(conninfo) {
        let taken = match word.split_once('=') {
            Some((key, value)) => take(key.trim(), value.trim().trim_matches('\''))?,
            None => false,
        };
        if !taken {
            kept.push(word);
        }
    }
    Ok(kept.join(" "))
}

/// The words of a `key=value` connection string, quoted values kept whole.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted => {
                word.push(c);
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '\'' => {
                quoted = !quoted;
                word.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    // `key = value` is as good as `key=value`
    let mut joined: Vec<String> = Vec::with_capacity(words.len());
    for word in words {
        match joined.last_mut() {
            Some(last) if last.ends_with('=') || word.starts_with('=') => last.push_str(&word),
            _ => joined.push(word),
        }
    }
    joined
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tls {
    /// The TLS settings a driver configuration already holds (disable, prefer or require,
    /// nothing verified): for a configuration built without a connection string.
    pub fn of(config: &Config) -> Tls {
        Tls {
            mode: match config.get_ssl_mode() {
                DriverMode::Disable => SslMode::Disable,
                DriverMode::Require => SslMode::Require,
                _ => SslMode::Prefer,
            },
            root_cert: None,
            pooler: super::Pooler::None,
        }
    }

    /// The mode the driver negotiates with (it verifies nothing itself).
    pub fn driver_mode(&self) -> DriverMode {
        match self.mode {
            SslMode::Disable => DriverMode::Disable,
            SslMode::Prefer => DriverMode::Prefer,
            _ => DriverMode::Require,
        }
    }

    /// Whether connections made with `config` use TLS at all: not with `disable`, and not
    /// over Unix sockets (PostgreSQL offers no TLS there).
    pub fn applies_to(&self, config: &Config) -> bool {
        self.mode != SslMode::Disable
            && config
                .get_hosts()
                .iter()
                .any(|h| matches!(h, tokio_postgres::config::Host::Tcp(_)))
    }

    /// The TLS connector for these settings.
    pub fn connector(&self) -> Result<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Setup(format!("cannot set up TLS: {e}")))?;
        let verify_ca = matches!(self.mode, SslMode::VerifyCa)
            || (self.mode == SslMode::Require && self.root_cert.is_some());
        let config = match self.mode {
            SslMode::VerifyFull => builder
                .with_root_certificates(self.roots()?)
                .with_no_client_auth(),
            _ if verify_ca => {
                let roots = Arc::new(self.roots()?);
                let inner =
                    rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
                        .build()
                        .map_err(|e| {
                            Error::Setup(format!("cannot set up TLS verification: {e}"))
                        })?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
                    .with_no_client_auth()
            }
            _ => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
                .with_no_client_auth(),
        };
        Ok(MakeRustlsConnect::new(config))
    }

    fn roots(&self) -> Result<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        let Some(path) = &self.root_cert else {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            return Ok(roots);
        };
        use rustls::pki_types::pem::PemObject;
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
            Error::InvalidInput(format!("cannot read sslrootcert {}: {e}", path.display()))
        })?;
        for cert in certs {
            let cert = cert.map_err(|e| {
                Error::InvalidInput(format!(
                    "sslrootcert {} is not a PEM certificate file: {e}",
                    path.display()
                ))
            })?;
            roots.add(cert).map_err(|e| {
                Error::InvalidInput(format!(
                    "sslrootcert {} holds a certificate rustls refuses: {e}",
                    path.display()
                ))
            })?;
        }
        if roots.is_empty() {
            return Err(Error::InvalidInput(format!(
                "sslrootcert {} holds no certificate",
                path.display()
            )));
        }
        Ok(roots)
    }
}

/// `prefer` and `require`: encryption without authentication of the server (libpq's
/// behaviour for these modes); signatures are still checked, so the handshake is sound.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name in it is not compared.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_taken_from_urls_and_key_value_strings() {
        let (config, tls) =
            parse("postgres://u@db.example:5433/app?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x")
                .expect("parses");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/tmp/ca.pem")));
        assert_eq!(config.get_application_name(), Some("x"));
        assert_eq!(config.get_ssl_mode(), DriverMode::Require);
        let (config, tls) = parse("host=h dbname='my db' sslmode=disable").expect("parses");
        assert_eq!(tls.mode, SslMode::Disable);
        let (_, tls) = parse("host=h sslmode = require dbname=x").expect("parses");
        assert_eq!(tls.mode, SslMode::Require, "spaces around = count too");
        assert!(
            parse("postgres://u@h/app?sslmode=verify-ca").is_err(),
            "verify-ca needs a root"
        );
        assert_eq!(config.get_dbname(), Some("my db"));
        let (_, tls) = parse("postgres://u@h/app").expect("parses");
        assert_eq!(tls, Tls::default());
        let err = parse("postgres://u@h/app?sslmode=sometimes").expect_err("bad mode");
        assert!(err.to_string().contains("verify-full"), "{err}");
    }
}

//! A real SMTP server for email tests, on 127.0.0.1: it speaks enough SMTP (EHLO, MAIL,
//! RCPT, DATA, RSET, NOOP, QUIT) to take mail from any client and keeps every message.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// One message the sink took.
#[derive(Clone, Debug)]
pub struct Mail {
    /// The envelope sender.
    pub from: String,
    /// The envelope recipients.
    pub to: Vec<String>,
    /// The message as sent (headers and body, dot-stuffing undone).
    pub data: String,
}

impl Mail {
    /// A header's value (first match, case-insensitive name).
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        head.split("\r\n").find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }

    /// The body after the headers.
    pub fn body(&self) -> String {
        self.data
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default()
    }
}

/// The sink; stopped when dropped.
pub struct SmtpSink {
    /// Its port on 127.0.0.1.
    pub port: u16,
    mails: Arc<Mutex<Vec<Mail>>>,
    stop: CancellationToken,
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl SmtpSink {
    /// Starts a sink.
    pub async fn start() -> std::io::Result<SmtpSink> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let m = mails.clone();
        super::serve_until(listener, stop.clone(), move |stream| {
            session(stream, m.clone())
        });
        Ok(SmtpSink { port, mails, stop })
    }

    /// Every message so far.
    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until at least `n` messages arrived, up to `within`.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Mail> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let got = self.mails();
            if got.len() >= n || tokio::time::Instant::now() >= deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn session(stream: TcpStream, mails: Arc<Mutex<Vec<Mail>>>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write
        .write_all(b"220 localhost remuda test sink\r\n")
        .await?;
    let (mut from, mut to) = (String::new(), Vec::new());
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_string();
        let verb = command
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let address = || {
            command
                .split_once(':')
                .map(|(_, a)| {
                    a.trim()
                        .trim_start_matches('<')
                        .trim_end_matches('>')
                        .to_string()
                })
                .unwrap_or_default()
        };
        let answer: &[u8] = match verb.as_str() {
            "EHLO" | "HELO" => b"250 localhost\r\n",
            "MAIL" => {
                from = address();
                to.clear();
                b"250 OK\r\n"
            }
            "RCPT" => {
                to.push(address());
                b"250 OK\r\n"
            }
            "DATA" => {
                write.write_all(b"354 go ahead\r\n").await?;
                let mut data = String::new();
                loop {
                    let mut l = String::new();
                    if read.read_line(&mut l).await? == 0 {
                        return Ok(());
                    }
                    if l == ".\r\n" || l == ".\n" {
                        break;
                    }
                    data.push_str(l.strip_prefix('.').unwrap_or(&l));
                }
                mails.lock().unwrap_or_else(|e| e.into_inner()).push(Mail {
                    from: from.clone(),
                    to: to.clone(),
                    data,
                });
                b"250 OK queued\r\n"
            }
            "RSET" | "NOOP" => b"250 OK\r\n",
            "QUIT" => {
                write.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            _ => b"502 not implemented\r\n",
        };
        write.write_all(answer).await?;
    }
}

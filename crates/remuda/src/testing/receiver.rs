//! A real HTTP receiver for webhook tests, on 127.0.0.1: it records every request (headers,
//! body, when) and answers as scripted (status, headers, an optional delay), so a test can
//! make a receiver fail, throttle, vanish or hang.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// One request the receiver took.
#[derive(Clone, Debug)]
pub struct Received {
    /// When its body had arrived.
    pub at: Instant,
    /// The request path.
    pub path: String,
    /// Headers, names in lowercase.
    pub headers: HashMap<String, String>,
    /// The body, as sent.
    pub body: String,
}

impl Received {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// An answer: a status, extra headers, and how long to wait before sending it.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Waited before answering.
    pub delay: Duration,
}

impl Reply {
    /// A bare status.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// With a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Answered after `delay`.
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    script: VecDeque<Reply>,
    default: Option<Reply>,
}

/// The receiver; stopped when dropped.
pub struct Receiver {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<Mutex<State>>,
    arrived: Arc<tokio::sync::Notify>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receiver {
    /// Starts a receiver that answers 200 unless told otherwise.
    pub async fn start() -> std::io::Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(Mutex::new(State::default()));
        let arrived = Arc::new(tokio::sync::Notify::new());
        let stop = CancellationToken::new();
        let (s, a) = (state.clone(), arrived.clone());
        super::serve_until(listener, stop.clone(), move |stream| {
            serve(stream, s.clone(), a.clone())
        });
        Ok(Receiver {
            url,
            state,
            arrived,
            stop,
        })
    }

    /// The next requests get these answers, in order; then the default.
    pub fn reply_next(&self, replies: impl IntoIterator<Item = Reply>) {
        self.lock().script.extend(replies);
    }

    /// The answer once the scripted ones are used up (200 when not set).
    pub fn reply_always(&self, reply: Reply) {
        self.lock().default = Some(reply);
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// Waits until at least `n` requests arrived, up to `within`; returns them all.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let arrived = self.arrived.notified();
            let got = self.received();
            if got.len() >= n || tokio::time::Instant::now() >= deadline {
                return got;
            }
            let _ = tokio::time::timeout_at(deadline, arrived).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Serves one connection's requests (HTTP/1.1, kept alive).
async fn serve(
    stream: TcpStream,
    state: Arc<Mutex<State>>,
    arrived: Arc<tokio::sync::Notify>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut headers = HashMap::new();
        loop {
            let mut header = String::new();
            if read.read_line(&mut header).await? == 0 {
                return Ok(());
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        read.read_exact(&mut body).await?;
        let reply = {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            s.received.push(Received {
                at: Instant::now(),
                path,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            s.script
                .pop_front()
                .or_else(|| s.default.clone())
                .unwrap_or_else(|| Reply::status(200))
        };
        arrived.notify_waiters();
        tokio::time::sleep(reply.delay).await;
        let mut head = format!("HTTP/1.1 {} Reply\r\ncontent-length: 0\r\n", reply.status);
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        write.write_all(head.as_bytes()).await?;
    }
}

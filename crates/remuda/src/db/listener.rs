//! The LISTEN connection: one dedicated connection per client that receives `remuda_insert`
//! (queue has new jobs), `remuda_done` (an awaited job finished), `remuda_workflow` (a workflow run ended), `remuda_outbox` (notifications to send), `remuda_queue` (a queue's
//! settings changed) and `remuda_cancel_run` (stop a
//! run of a job), and fans them out to subscribers. It reconnects with backoff. Each time it
//! starts listening (the first time too) it sends [`Event::Listening`], so producers poll
//! once for whatever was announced while nobody listened.
//!
//! Behind a transaction-mode pooler LISTEN cannot work (the session that listens is not the
//! one the pooler hands out next): the listener connects directly to PostgreSQL when given
//! the address ([`crate::Database::with_direct`]), and otherwise does not run at all
//! ([`Listener::polling`]): workers and waits then find their work by polling, as River's
//! poll-only mode does.

use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, Config};
use tokio_util::sync::CancellationToken;

/// Channels remuda listens on (`remuda_cancel_run`, not `remuda_cancel`: the cancel that
/// names the run; the other, without the attempt, is for workers of earlier releases).
pub(crate) const CHANNELS: [&str; 6] = [
    "remuda_insert",
    "remuda_done",
    "remuda_cancel_run",
    "remuda_queue",
    "remuda_workflow",
    "remuda_outbox",
];

/// Something the listener heard.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// A notification on one of [`CHANNELS`].
    Notification {
        channel: Arc<str>,
        payload: Arc<str>,
    },
    /// The connection is listening (again): notifications sent before may have been missed.
    Listening,
}

/// Handle to the background listener; dropping every handle does not stop it, the token does.
#[derive(Clone)]
pub(crate) struct Listener {
    events: broadcast::Sender<Event>,
    ready: tokio::sync::watch::Receiver<bool>,
    /// No connection to listen on: everything is found by polling.
    polling: bool,
}

impl Listener {
    /// Starts listening in the background until `stop` is cancelled, on a connection to
    /// `target` (`None`: no session can be had, see [`Listener::polling`]).
    pub(crate) fn start(
        target: Option<(Config, super::tls::Tls)>,
        stop: CancellationToken,
    ) -> Listener {
        let (events, _) = broadcast::channel(4096);
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let sender = events.clone();
        let polling = target.is_none();
        if let Some((config, tls)) = target {
            tokio::spawn(async move { run(config, tls, sender, ready_tx, stop).await });
        }
        Listener {
            events,
            ready,
            polling,
        }
    }

    /// Whether there is nothing to listen on (behind a transaction-mode pooler without a
    /// direct address): callers poll.
    pub(crate) fn polling(&self) -> bool {
        self.polling
    }

    /// Waits until the connection is listening, up to `limit`; false if it is not by then
    /// (at once when [`Listener::polling`]).
    pub(crate) async fn ready(&self, limit: Duration) -> bool {
        if self.polling {
            return false;
        }
        let mut ready = self.ready.clone();
        tokio::time::timeout(limit, ready.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// A new receiver of every event from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}

async fn run(
    config: Config,
    tls: super::tls::Tls,
    events: broadcast::Sender<Event>,
    ready: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
) {
    // the pool checked these settings when it was made (Database::with_tls)
    let tls = if tls.applies_to(&config) {
        match tls.connector() {
            Ok(connector) => Some(connector),
            Err(e) => {
                tracing::error!("remuda listener: cannot set up TLS: {e}");
                return;
            }
        }
    } else {
        None
    };
    let mut backoff = Duration::from_millis(50);
    let mut connected_before = false;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let result = listen_once(&config, &tls, &events, &ready, &stop).await;
        if ready.send_replace(false) {
            // it was listening: a fresh failure, not one more in a row
            backoff = Duration::from_millis(50);
        }
        match result {
            Ok(()) => return,
            Err(e) => {
                if connected_before {
                    tracing::warn!("remuda listener lost its connection: {e}; reconnecting");
                } else {
                    tracing::debug!("remuda listener cannot connect: {e}; retrying");
                }
            }
        }
        connected_before = true;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One connection's life: returns Ok when stopped, Err when the connection failed.
async fn listen_once(
    config: &Config,
    tls: &Option<tokio_postgres_rustls::MakeRustlsConnect>,
    events: &broadcast::Sender<Event>,
    ready: &tokio::sync::watch::Sender<bool>,
    stop: &CancellationToken,
) -> Result<(), tokio_postgres::Error> {
    match tls {
        Some(tls) => {
            let (client, connection) = config.connect(tls.clone()).await?;
            listen_on(client, connection, events, ready, stop).await
        }
        None => {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
            listen_on(client, connection, events, ready, stop).await
        }
    }
}

/// Listens on one connection until it fails or `stop`.
async fn listen_on<S, T>(
    client: tokio_postgres::Client,
    mut connection: tokio_postgres::Connection<S, T>,
    events: &broadcast::Sender<Event>,
    ready: &tokio::sync::watch::Sender<bool>,
    stop: &CancellationToken,
) -> Result<(), tokio_postgres::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            let failed = message.is_err();
            if tx.send(message).is_err() || failed {
                break;
            }
        }
    });
    let listen: String = CHANNELS.iter().map(|c| format!("LISTEN {c};")).collect();
    let result = async {
        client.batch_execute(&listen).await?;
        ready.send_replace(true);
        let _ = events.send(Event::Listening);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                message = rx.recv() => match message {
                    Some(Ok(AsyncMessage::Notification(n))) => {
                        let _ = events.send(Event::Notification {
                            channel: n.channel().into(),
                            payload: n.payload().into(),
                        });
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    // the connection ended: surface it as an error by issuing a query
                    None => {
                        client.simple_query("").await?;
                        return Ok(());
                    }
                }
            }
        }
    }
    .await;
    driver.abort();
    result
}

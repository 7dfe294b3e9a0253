//! A connection that fails says why, in the server's or the network's words, with the advice
//! that fits: authentication failed (a private cluster that wants a password), a server
//! that accepts the connection but never answers (a listener of the test's own), and a pool
//! whose connections all stay busy; a database that does not exist, and a refused connection.

use remuda::db::cluster::ClusterOptions;
use remuda::testing::PrivateCluster;
use remuda::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_named_as_such() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let options = ClusterOptions {
        port,
        extra_settings: "listen_addresses = '127.0.0.1'\npassword_encryption = 'scram-sha-256'\n"
            .into(),
        files: vec![(
            "pg_hba.conf".into(),
            b"local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n".to_vec(),
        )],
    };
    let cluster = PrivateCluster::start_with(&options)
        .await
        .expect("a cluster");
    let admin = Client::connect(&cluster.conninfo())
        .await
        .expect("over the socket");
    admin
        .database()
        .conn()
        .await
        .expect("conn")
        .batch_execute("ALTER ROLE remuda PASSWORD 'right'")
        .await
        .expect("set a password");
    let good = format!("postgres://remuda:right@127.0.0.1:{port}/remuda");
    Client::connect(&good).await.expect("the right password");
    let bad = format!("postgres://remuda:wrong@127.0.0.1:{port}/remuda");
    let err = Client::connect(&bad).await.expect_err("a wrong password");
    let text = err.to_string();
    assert!(
        text.contains("28P01") && text.contains("authentication failed"),
        "{text}"
    );
    assert!(!text.contains("wrong"), "the password is not shown: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_times_out_and_says_so() {
    // accepts connections and never says a word
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let port = silent.local_addr().expect("address").port();
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            kept.push(socket);
        }
    });
    let url =
        format!("postgres://remuda@127.0.0.1:{port}/remuda?connect_timeout=1&sslmode=disable");
    let started = std::time::Instant::now();
    let err = Client::connect(&url).await.expect_err("no answer");
    // connect_timeout covers the TCP connection; the start-up that never comes is bounded by
    // the pool's creation timeout
    let bound = remuda::db::POOL_CREATE_TIMEOUT + std::time::Duration::from_secs(5);
    assert!(
        started.elapsed() < bound,
        "gave up after {:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(text.contains("no answer within 15 s"), "{text}");
    assert!(err.is_database_unusable(), "{err:?}");
    held.abort();
}

/// A pool whose every connection stays taken fails the next call after its wait timeout,
/// saying why, instead of waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_whose_connections_all_stay_busy_says_so_after_its_wait_timeout() {
    let test = remuda::testing::TestDatabase::new()
        .await
        .expect("test database");
    let config: tokio_postgres::Config = test.conninfo().parse().expect("conninfo");
    let pool = remuda::Database::from_config(config, 2);
    let _first = pool.conn().await.expect("first connection");
    let _second = pool.conn().await.expect("second connection");
    let started = std::time::Instant::now();
    let err = pool.conn().await.expect_err("no connection left");
    assert!(
        started.elapsed() >= remuda::db::POOL_WAIT_TIMEOUT,
        "gave up after {:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(
        text.contains("all 2 connections stayed busy for 30 s"),
        "{text}"
    );
}

/// A database that does not exist and a port where nothing listens are named as such, each
/// with the advice that fits, not a generic "check that the server is running".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_database_and_a_refused_connection_are_named_with_their_advice() {
    let test = remuda::testing::TestDatabase::new()
        .await
        .expect("test database");
    let config: tokio_postgres::Config = test.conninfo().parse().expect("conninfo");
    let mut missing = config.clone();
    missing.dbname("remuda_no_such_database");
    let err = remuda::Database::from_config(missing, 1)
        .ping()
        .await
        .expect_err("no such database");
    let text = err.to_string();
    assert!(
        text.contains("SQLSTATE 3D000") && text.contains("create it (createdb)"),
        "{text}"
    );
    assert!(!text.contains("Check that the server is running"), "{text}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let err = Client::connect(&format!("postgres://remuda@127.0.0.1:{port}/remuda"))
        .await
        .expect_err("nothing listens");
    let text = err.to_string();
    assert!(
        text.contains("connection refused: no server listens there"),
        "{text}"
    );
    assert!(err.is_database_unusable(), "{err:?}");
}

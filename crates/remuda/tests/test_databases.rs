//! `TestDatabase` cleans up only what is provably abandoned: a test database of another run
//! (another container sharing the server, CI beside a developer) is left alone while that
//! run holds it, whatever its name says about processes.

use remuda::db::setup::Resolve;
use remuda::testing::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_runs_live_test_database_is_never_dropped() {
    let admin = Resolve::from_env().resolve().await.expect("server");
    let connect = || async {
        let (client, connection) = admin.connect(tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(connection);
        client
    };
    let suffix = format!("{:06x}", fastrand::u32(..0x1000000));
    // names as another machine's run makes them: its pid is no process here
    let live = format!("remuda_t_999999999_0_{suffix}l");
    let gone = format!("remuda_t_999999999_0_{suffix}g");
    let other_run = connect().await;
    other_run
        .execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&live])
        .await
        .expect("the other run owns its database");
    let setup = connect().await;
    let live_scratch = format!("{live}_bench");
    let gone_scratch = format!("{gone}_demo");
    for name in [&live, &gone, &live_scratch, &gone_scratch] {
        setup
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create");
    }
    let _mine = TestDatabase::new()
        .await
        .expect("a test database of this run");
    let exists = |name: String| {
        let setup = &setup;
        async move {
            setup
                .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
                .await
                .expect("look up")
                .is_some()
        }
    };
    assert!(
        exists(live.clone()).await,
        "a live database of another run is kept"
    );
    assert!(!exists(gone.clone()).await, "an abandoned one is dropped");
    assert!(
        exists(live_scratch.clone()).await,
        "the bench database beside a live one lives with it"
    );
    assert!(
        !exists(gone_scratch.clone()).await,
        "and dies with an abandoned one"
    );
    for name in [&live, &live_scratch] {
        setup
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .expect("clean up");
    }
}

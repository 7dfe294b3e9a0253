//! TLS to PostgreSQL against a private cluster started with `ssl = on`, TCP on 127.0.0.1
//! only over TLS (`hostssl`), and certificates made by the test: each `sslmode` does what
//! libpq's does, and every refusal says why.

mod common;

use common::{fast_config, start, Add, AddArgs};
use remuda::db::cluster::ClusterOptions;
use remuda::testing::PrivateCluster;
use remuda::{Client, JobState, Worker};
use std::path::Path;
use std::time::Duration;

async fn openssl(dir: &Path, args: &[&str]) {
    let output = tokio::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .expect("run openssl");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA, a server certificate it signed for the name `db.example` only, and an unrelated CA.
async fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other"] {
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        let (key, pem, subject) = (
            format!("{ca}.key"),
            format!("{ca}.pem"),
            format!("/CN=remuda test {ca}"),
        );
        args.extend([
            "-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subject,
        ]);
        openssl(dir, &args).await;
    }
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=db.example",
    ]);
    openssl(dir, &args).await;
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:db.example\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("extensions");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sslmode_connects_or_refuses_as_libpq_does() {
    let dir = std::env::temp_dir().join(format!("remuda-tls-{:08x}", fastrand::u32(..)));
    std::fs::create_dir_all(&dir).expect("dir");
    certificates(&dir).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let read = |name: &str| std::fs::read(dir.join(name)).expect("read");
    let options = ClusterOptions {
        port,
        extra_settings: "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nlisten_addresses = '127.0.0.1'\n".into(),
        files: vec![
            ("server.crt".into(), read("server.crt")),
            ("server.key".into(), read("server.key")),
            ("pg_hba.conf".into(), b"local all all trust\nhostssl all all 127.0.0.1/32 trust\n".to_vec()),
        ],
    };
    let cluster = PrivateCluster::start_with(&options)
        .await
        .expect("a TLS cluster");
    let url = |query: &str| {
        format!("postgres://remuda@db.example:{port}/remuda?hostaddr=127.0.0.1&{query}")
    };
    let root = |file: &str| dir.join(file).display().to_string();

    // require: encrypted, unchecked; pool and listener both work over it
    let client = Client::connect(&url("sslmode=require"))
        .await
        .expect("require connects");
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(Add),
    );
    let id = client
        .enqueue::<Add>(&AddArgs { a: 2, b: 3 })
        .await
        .expect("enqueue");
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("ran over TLS");
    assert_eq!(job.state, JobState::Completed);
    worker.shutdown().await;
    let tls_in_use: bool = client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl")
        .get(0);
    assert!(tls_in_use, "the connection is encrypted");

    // verify-full with the CA that signed the certificate, for the name it bears
    let full = url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        root("ca.pem")
    ));
    Client::connect(&full)
        .await
        .expect("verify-full with the right root");
    // verify-full with another root: refused, saying why
    let wrong = url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        root("other.pem")
    ));
    let err = Client::connect(&wrong).await.expect_err("wrong root");
    assert!(
        err.to_string().contains("sslrootcert must name the CA"),
        "{err}"
    );
    // verify-ca checks the chain, not the name; verify-full checks both
    let by_ip = |mode: &str| {
        format!(
            "postgres://remuda@127.0.0.1:{port}/remuda?sslmode={mode}&sslrootcert={}",
            root("ca.pem")
        )
    };
    Client::connect(&by_ip("verify-ca"))
        .await
        .expect("verify-ca ignores the name");
    let err = Client::connect(&by_ip("verify-full"))
        .await
        .expect_err("name mismatch");
    assert!(err.to_string().contains("certificate"), "{err}");
    // disable, against a server that takes TCP only over TLS
    let err = Client::connect(&url("sslmode=disable"))
        .await
        .expect_err("plain refused");
    assert!(err.to_string().contains("only over TLS"), "{err}");
    // a root file that is not there
    let err = Client::connect(&url("sslmode=verify-full&sslrootcert=/surely/not/here.pem"))
        .await
        .expect_err("no root file");
    assert!(err.to_string().contains("/surely/not/here.pem"), "{err}");

    // a Unix socket never uses TLS, whatever the mode asks
    let socket = format!("{} sslmode=require", cluster.conninfo());
    Client::connect(&socket)
        .await
        .expect("require over the socket connects without TLS");

    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

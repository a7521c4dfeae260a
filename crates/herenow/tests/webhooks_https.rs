//! Issue 11: webhooks over HTTPS check the receiver's certificate. A TLS
//! front (rustls, a certificate for 127.0.0.1 signed by a private CA the
//! test makes) passes requests to the test receiver. `herenow webhooks
//! test` delivers through it when `SSL_CERT_FILE` names that CA, and
//! refuses, sending nothing, when it does not: the CA is not trusted.

use std::sync::Arc;

use herenow_testkit::RedisServer;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

mod support;

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;
use receiver::{Receiver, verify};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Terminates TLS on a free port and forwards each connection to
/// `backend`; returns the port.
async fn tls_front(dir: &std::path::Path, backend: std::net::SocketAddr) -> u16 {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that does not trust the certificate gives up
                // in the handshake: nothing to forward.
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_11_https_endpoints_are_checked_against_ssl_cert_file() {
    // The testkit's TLS Redis makes a CA and a certificate for 127.0.0.1;
    // only the files are used here.
    let certs = RedisServer::standalone_tls();
    let ca = certs.ca_file();
    let dir = ca.parent().unwrap().to_owned();
    let mut rx = Receiver::start().await;
    let port = tls_front(&dir, rx.addr).await;
    let url = format!("https://127.0.0.1:{port}/hook");
    let run = |trust: Option<std::path::PathBuf>| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let mut cmd = support::herenow();
            cmd.args(["webhooks", "test", &url, "--secret", SECRET])
                .env_remove("SSL_CERT_FILE")
                .env_remove("SSL_CERT_DIR");
            if let Some(ca) = trust {
                cmd.env("SSL_CERT_FILE", ca);
            }
            cmd.output().unwrap()
        })
    };

    // The private CA is not among the system's roots: refused, nothing
    // reaches the receiver.
    let out = run(None).await.unwrap();
    assert!(
        !out.status.success(),
        "an untrusted certificate was accepted"
    );
    assert!(
        support::stderr(&out).contains("invalid peer certificate"),
        "{}",
        support::stderr(&out)
    );
    assert!(rx.try_next().is_none());

    // Trusted through SSL_CERT_FILE: delivered, signed.
    let out = run(Some(ca)).await.unwrap();
    assert!(out.status.success(), "{}", support::stderr(&out));
    let got = rx.next().await;
    assert!(verify(
        SECRET,
        &got.id,
        &got.timestamp,
        &got.body,
        &got.signature
    ));
}

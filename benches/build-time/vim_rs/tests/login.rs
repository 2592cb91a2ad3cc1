//! The seat's test, built by `cargo test --no-run` to see what a test kit adds to the build:
//! a refused login is an error, not a session.

use vim_rs::core::client::{ClientBuilder, TransportMode};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn a_server_error_is_no_session() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let host = server.address().to_string();
    let client = ClientBuilder::new(&host)
        .insecure(true)
        .basic_authn("user", "pass")
        .transport(TransportMode::Soap)
        .build()
        .await;
    assert!(client.is_err());
}

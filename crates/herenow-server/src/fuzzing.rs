//! Test support for the property tests that fuzz the server's decoders
//! (WebSocket frames in `ws/wire/fuzz.rs`, tokens in
//! `token/fuzz.rs`): `cargo test -p herenow-server --lib fuzz`.

use proptest::prelude::*;

/// `n` cases for a run of the test suite, or `PROPTEST_CASES` when it is
/// set (`ProptestConfig::with_cases` alone would ignore it): a longer run
/// is `PROPTEST_CASES=100000 cargo test … fuzz`.
pub fn cases(n: u32) -> ProptestConfig {
    if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(n)
    }
}

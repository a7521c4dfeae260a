//! Pusher's signatures: HMAC-SHA256 in lowercase hex, over a channel
//! authorization (`socket_id:channel[:channel_data]`) or an API request
//! (`METHOD\nPATH\nQUERY`), and the MD5 of a request body.

use md5::{Digest, Md5};
use subtle::ConstantTimeEq;

pub(crate) use crate::webhooks::sign::hex;

/// HMAC-SHA256 of `message` under `secret`, in lowercase hex.
pub(crate) fn hmac_hex(secret: &str, message: &str) -> String {
    crate::webhooks::sign::hmac_hex(secret.as_bytes(), message.as_bytes())
}

/// MD5 of `body`, in lowercase hex (`body_md5`).
pub(crate) fn md5_hex(body: &[u8]) -> String {
    hex(&Md5::digest(body))
}

/// Compares a signature a client sent with the expected one in constant
/// time (for equal lengths).
pub(crate) fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// What a channel authorization signs.
pub(crate) fn channel_auth_message(
    socket_id: &str,
    channel: &str,
    channel_data: Option<&str>,
) -> String {
    match channel_data {
        Some(data) => format!("{socket_id}:{channel}:{data}"),
        None => format!("{socket_id}:{channel}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // RFC 4231, test case 2.
        assert_eq!(
            hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // RFC 1321's test suite.
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert_eq!(
            channel_auth_message("1.2", "private-a", None),
            "1.2:private-a"
        );
        assert_eq!(
            channel_auth_message("1.2", "presence-a", Some("{}")),
            "1.2:presence-a:{}"
        );
    }
}

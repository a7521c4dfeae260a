//! Signing as the Standard Webhooks specification says: an HMAC-SHA256 of
//! `{webhook-id}.{webhook-timestamp}.{body}` under the endpoint's secret,
//! sent base64 as `webhook-signature: v1,{signature}`. Secrets are
//! written `whsec_` and the base64 of their bytes, so a receiver verifies
//! with the specification's own libraries given the same string.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a secret's written form.
pub const SECRET_PREFIX: &str = "whsec_";

/// The shortest secret accepted, in bytes (the specification asks for 24
/// to 64 random bytes).
pub const MIN_SECRET_BYTES: usize = 24;

/// The longest secret accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 64;

/// An endpoint's signing secret. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

/// Why a secret was refused. The message never repeats the secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not `whsec_…`.
    #[error("a webhook secret must start with whsec_ (then the base64 of 24 to 64 random bytes)")]
    NoPrefix,
    /// What follows `whsec_` is not base64.
    #[error("a webhook secret is whsec_ and base64; what follows whsec_ is not base64")]
    NotBase64,
    /// Too short or too long.
    #[error(
        "a webhook secret must hold {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes; \
         this one holds {0} (try: echo whsec_$(openssl rand -base64 32))"
    )]
    Length(usize),
}

impl Secret {
    /// The secret's bytes, checked for length.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, SecretError> {
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&bytes.len()) {
            return Err(SecretError::Length(bytes.len()));
        }
        Ok(Self(bytes))
    }

    /// The `v1,…` signature of `body` sent as message `id` at
    /// `timestamp` (Unix seconds): the value of `webhook-signature`.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        // HMAC takes a key of any length; this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }

    /// The written form, `whsec_` and base64: what a store keeps for a
    /// space's endpoint signed with the server's default secret.
    pub fn to_written(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.0))
    }
}

/// What signs an endpoint's requests: a Standard Webhooks secret, or a
/// Pusher app's key and secret (`--pusher-webhook`).
#[derive(Clone, PartialEq, Eq)]
pub enum Signer {
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature`.
    Standard(Secret),
    /// `X-Pusher-Key`, `X-Pusher-Signature`.
    Pusher(PusherSigner),
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signer::Standard(_) => f.write_str("Standard(***)"),
            Signer::Pusher(p) => write!(f, "Pusher({:?}, ***)", p.key),
        }
    }
}

/// A Pusher app's webhook signature: `X-Pusher-Key` is the app's key,
/// `X-Pusher-Signature` the hex HMAC-SHA256 of the body under the app's
/// secret (what Pusher's server libraries' `webhook(...).isValid()`
/// checks). `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct PusherSigner {
    key: String,
    secret: String,
}

impl PusherSigner {
    /// The signer of the app with this key and secret.
    pub fn new(key: &str, secret: &str) -> Self {
        Self {
            key: key.to_owned(),
            secret: secret.to_owned(),
        }
    }

    /// The app's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The hex HMAC-SHA256 of `body` under the app's secret.
    pub fn sign(&self, body: &[u8]) -> String {
        hmac_hex(self.secret.as_bytes(), body)
    }
}

/// HMAC-SHA256 of `message` under `secret`, in lowercase hex (Pusher's
/// signatures, of requests and of webhooks).
pub(crate) fn hmac_hex(secret: &[u8], message: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(message);
    hex(&mac.finalize().into_bytes())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl std::str::FromStr for Secret {
    type Err = SecretError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b64 = s.strip_prefix(SECRET_PREFIX).ok_or(SecretError::NoPrefix)?;
        let bytes = STANDARD
            .decode(b64.trim())
            .map_err(|_| SecretError::NotBase64)?;
        Self::from_bytes(bytes)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own vector (its Python library's
    /// `test_sign_function`).
    #[test]
    fn signs_the_specifications_test_vector() {
        let secret: Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    /// RFC 4231's second test case: key "Jefe".
    #[test]
    fn pusher_signatures_are_hex_hmac_sha256_of_the_body() {
        let signer = PusherSigner::new("app-key", "Jefe");
        assert_eq!(
            signer.sign(b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(signer.key(), "app-key");
        let debug = format!("{:?}", Signer::Pusher(signer));
        assert!(!debug.contains("Jefe"), "{debug}");
    }

    #[test]
    fn bad_secrets_are_refused_without_echo() {
        for (bad, why) in [
            ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", SecretError::NoPrefix),
            ("whsec_not base64!", SecretError::NotBase64),
            ("whsec_c2hvcnQ=", SecretError::Length(5)),
        ] {
            assert_eq!(bad.parse::<Secret>(), Err(why), "{bad}");
        }
        let secret: Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(format!("{secret:?}"), "Secret(***)");
    }
}

//! WebSocket tokens: JWTs signed with HS256 by the server's secret, the
//! WebSocket's only credential (browsers cannot send headers with one).
//! A backend mints one (`POST /v1/tokens`) for one member and a few
//! spaces; the claims are docs/PROTOCOL.md's.
//!
//! Only HS256 is accepted (no `none`, no algorithm from the token's
//! header), the signature is checked before anything in the token is
//! believed, and `exp` has no leeway.

use std::time::{SystemTime, UNIX_EPOCH};

use herenow_core::{MemberId, MemberKey, MemberKind, SpaceName};
use jsonwebtoken::errors::ErrorKind as JwtErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::protocol::dto::{MemberKindDto, WatchGrant};

/// The `iss` of every token.
pub const ISSUER: &str = "herenow";
/// Most spaces one token may name.
pub const MAX_TOKEN_SPACES: usize = 32;
/// A token's lifetime when the caller names none: an hour.
pub const DEFAULT_TTL_S: u64 = 3_600;
/// The longest lifetime a token may be given: a day.
pub const MAX_TTL_S: u64 = 86_400;
/// The spaces entry that allows every space.
pub const ANY_SPACE: &str = "*";

/// Why a token was refused; the WebSocket closes with the protocol's code
/// for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, signed with another secret or algorithm, not issued by
    /// herenow, or with claims that are missing or malformed.
    #[error("bad token: {0}")]
    Invalid(String),
    /// Well signed, but past its `exp`.
    #[error("token expired")]
    Expired,
}

/// The spaces a token allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spaces {
    /// Every space (`["*"]`).
    All,
    /// These, 1 to [`MAX_TOKEN_SPACES`], without repeats.
    Only(Vec<SpaceName>),
}

/// Why a list of spaces cannot go in a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpacesError {
    /// None, or more than [`MAX_TOKEN_SPACES`].
    #[error("a token names 1 to {MAX_TOKEN_SPACES} spaces, or [\"*\"] for all; got {0}")]
    Count(usize),
    /// `*` together with names.
    #[error("\"*\" allows every space and must be the only entry")]
    StarWithNames,
    /// A name that is not a space name.
    #[error(transparent)]
    Name(#[from] herenow_core::InvalidInput),
}

impl Spaces {
    /// Checks a list as it comes in a request or a token: 1 to 32 space
    /// names (repeats dropped), or `["*"]`.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, SpacesError> {
        if names.is_empty() || names.len() > MAX_TOKEN_SPACES {
            return Err(SpacesError::Count(names.len()));
        }
        if names.iter().any(|n| n.as_ref() == ANY_SPACE) {
            return if names.len() == 1 {
                Ok(Spaces::All)
            } else {
                Err(SpacesError::StarWithNames)
            };
        }
        let mut out: Vec<SpaceName> = Vec::with_capacity(names.len());
        for n in names {
            let name = SpaceName::new(n.as_ref())?;
            if !out.contains(&name) {
                out.push(name);
            }
        }
        Ok(Spaces::Only(out))
    }

    /// Whether `space` is allowed.
    pub fn allows(&self, space: &SpaceName) -> bool {
        match self {
            Spaces::All => true,
            Spaces::Only(names) => names.contains(space),
        }
    }

    /// The list as it goes on the wire.
    pub fn names(&self) -> Vec<String> {
        match self {
            Spaces::All => vec![ANY_SPACE.to_owned()],
            Spaces::Only(names) => names.iter().map(|s| s.as_str().to_owned()).collect(),
        }
    }
}

/// What a valid token grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The member the socket is present as, user or guest: the token's
    /// subject.
    pub member: MemberKey,
    /// Where it may join and subscribe.
    pub spaces: Spaces,
    /// Whom it may watch.
    pub watch: WatchGrant,
    /// When the token expires, in seconds since the UNIX epoch.
    pub expires_at_s: u64,
}

/// The claims on the wire.
#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    kind: MemberKindDto,
    spaces: Vec<String>,
    /// Absent in tokens minted before watching: friends only.
    #[serde(default)]
    watch: WatchGrant,
    exp: u64,
    iat: u64,
    iss: String,
}

/// Mints and checks tokens with one secret.
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(***)")
    }
}

/// Seconds since the UNIX epoch, by the system clock (the clock `exp` is
/// checked against).
pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Tokens {
    /// Tokens signed with `secret` (a `TokenSecret`, checked long
    /// enough where it is made).
    pub fn new(secret: &(impl AsRef<[u8]> + ?Sized)) -> Self {
        let secret = secret.as_ref();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "sub", "iss"]);
        // Tokens live an hour; a minute of grace would only blur tests and
        // revocations.
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
        }
    }

    /// Tokens signed with a fresh random secret: they die with the process.
    pub fn random() -> Self {
        // 48 bytes: above `MIN_TOKEN_SECRET_BYTES`. Where `random_bytes`
        // falls back to the time and the process id, refusing to start
        // would be kinder.
        Self::new(&crate::socket::random_bytes::<48>())
    }

    /// A token for `member` in `spaces`, issued at `issued_at_s` (seconds
    /// since the UNIX epoch) and valid for `ttl_s` seconds.
    pub fn mint(
        &self,
        member: &MemberKey,
        spaces: &Spaces,
        issued_at_s: u64,
        ttl_s: u64,
    ) -> Result<String, TokenError> {
        self.mint_watching(member, spaces, WatchGrant::default(), issued_at_s, ttl_s)
    }

    /// [`mint`](Self::mint), naming whom the socket may watch.
    pub fn mint_watching(
        &self,
        member: &MemberKey,
        spaces: &Spaces,
        watch: WatchGrant,
        issued_at_s: u64,
        ttl_s: u64,
    ) -> Result<String, TokenError> {
        let claims = Claims {
            sub: member.id.as_str().to_owned(),
            kind: member.kind.into(),
            spaces: spaces.names(),
            watch,
            exp: issued_at_s.saturating_add(ttl_s),
            iat: issued_at_s,
            iss: ISSUER.to_owned(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| TokenError::Invalid(format!("cannot sign: {e}")))
    }

    /// Checks `token`: signature, algorithm, issuer, expiry, then the
    /// claims' shapes.
    pub fn verify(&self, token: &str) -> Result<Grant, TokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| match e.kind() {
                JwtErrorKind::ExpiredSignature => TokenError::Expired,
                JwtErrorKind::InvalidSignature => {
                    TokenError::Invalid("signature does not match".into())
                }
                JwtErrorKind::InvalidIssuer => TokenError::Invalid("not issued by herenow".into()),
                JwtErrorKind::InvalidAlgorithm => {
                    TokenError::Invalid("not signed with HS256".into())
                }
                JwtErrorKind::MissingRequiredClaim(c) => {
                    TokenError::Invalid(format!("missing claim {c}"))
                }
                _ => TokenError::Invalid("not a well-formed JWT".into()),
            })?;
        let claims = data.claims;
        let id = MemberId::new(&claims.sub)
            .map_err(|e| TokenError::Invalid(format!("claim sub: {e}")))?;
        let spaces = Spaces::parse(&claims.spaces)
            .map_err(|e| TokenError::Invalid(format!("claim spaces: {e}")))?;
        let kind: MemberKind = claims.kind.into();
        Ok(Grant {
            member: MemberKey { kind, id },
            spaces,
            watch: claims.watch,
            expires_at_s: claims.exp,
        })
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> Vec<u8> {
        s.repeat(32).into_bytes()
    }

    fn ann() -> MemberKey {
        MemberKey::user(MemberId::new("ann").unwrap())
    }

    #[test]
    fn a_minted_token_verifies_to_its_grant() {
        let t = Tokens::new(&secret("a"));
        let spaces = Spaces::parse(&["room:1", "room:2", "room:1"]).unwrap();
        let token = t.mint(&ann(), &spaces, now_s(), 60).unwrap();
        let g = t.verify(&token).unwrap();
        assert_eq!(g.member, ann());
        assert_eq!(g.spaces.names(), ["room:1", "room:2"]);
        assert!(g.spaces.allows(&SpaceName::new("room:2").unwrap()));
        assert!(!g.spaces.allows(&SpaceName::new("room:3").unwrap()));

        let guest = MemberKey::guest(MemberId::new("g").unwrap());
        let token = t.mint(&guest, &Spaces::All, now_s(), 60).unwrap();
        let g = t.verify(&token).unwrap();
        assert_eq!(g.member.kind, MemberKind::Guest);
        assert!(g.spaces.allows(&SpaceName::new("anything").unwrap()));
    }

    #[test]
    fn forged_expired_and_foreign_tokens_are_refused() {
        let t = Tokens::new(&secret("a"));
        let other = Tokens::new(&secret("b"));
        let token = other.mint(&ann(), &Spaces::All, now_s(), 60).unwrap();
        assert!(matches!(t.verify(&token), Err(TokenError::Invalid(_))));

        let old = t.mint(&ann(), &Spaces::All, now_s() - 120, 60).unwrap();
        assert_eq!(t.verify(&old), Err(TokenError::Expired));
        // An expired token from another secret is a forgery first.
        let old = other.mint(&ann(), &Spaces::All, now_s() - 120, 60).unwrap();
        assert!(matches!(t.verify(&old), Err(TokenError::Invalid(_))));

        for junk in ["", "x", "a.b.c", "eyJhbGciOiJub25lIn0.e30."] {
            assert!(
                matches!(t.verify(junk), Err(TokenError::Invalid(_))),
                "{junk}"
            );
        }
        // A tampered payload breaks the signature.
        let token = t.mint(&ann(), &Spaces::All, now_s(), 60).unwrap();
        let mut parts: Vec<&str> = token.split('.').collect();
        let evil = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            format!(
                r#"{{"sub":"root","spaces":["*"],"exp":{},"iat":0,"iss":"herenow"}}"#,
                now_s() + 60
            ),
        );
        parts[1] = &evil;
        assert!(matches!(
            t.verify(&parts.join(".")),
            Err(TokenError::Invalid(_))
        ));
    }

    #[test]
    fn space_lists_are_checked() {
        assert_eq!(Spaces::parse::<&str>(&[]), Err(SpacesError::Count(0)));
        let many: Vec<String> = (0..33).map(|i| format!("s{i}")).collect();
        assert_eq!(Spaces::parse(&many), Err(SpacesError::Count(33)));
        assert_eq!(Spaces::parse(&["*", "a"]), Err(SpacesError::StarWithNames));
        assert!(matches!(
            Spaces::parse(&["no spaces"]),
            Err(SpacesError::Name(_))
        ));
        assert_eq!(Spaces::parse(&["*"]), Ok(Spaces::All));
    }
}

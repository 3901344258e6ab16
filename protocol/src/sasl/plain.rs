//! `PLAIN` (RFC 4616): one message, `[authzid] NUL authcid NUL passwd`, UTF-8.

use subtle::ConstantTimeEq;

use super::{CredentialStore, SaslError, Secret};

/// Longest user name or password accepted (RFC 4616 allows 255 octets each).
const MAX_FIELD: usize = 255;

/// The client's one message: no authorization id, then `user` and `password`.
pub fn client_message(user: &str, password: &Secret) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + user.len() + password.expose().len());
    out.push(0);
    out.extend_from_slice(user.as_bytes());
    out.push(0);
    out.extend_from_slice(password.expose().as_bytes());
    out
}

/// The three fields of a PLAIN message.
#[derive(Debug, PartialEq, Eq)]
pub struct PlainMessage<'a> {
    /// The authorization identity, empty when the client gave none.
    pub authzid: &'a str,
    /// The user name.
    pub user: &'a str,
    /// The password; compare it with [`verify`], not `==`.
    pub password: &'a str,
}

/// Parses a PLAIN message.
pub fn parse(message: &[u8]) -> Result<PlainMessage<'_>, SaslError> {
    let text = std::str::from_utf8(message)
        .map_err(|_| SaslError::Malformed("PLAIN message is not UTF-8"))?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::Malformed(
            "PLAIN message needs exactly three NUL-separated fields",
        ));
    };
    if user.is_empty() || password.is_empty() {
        return Err(SaslError::Malformed(
            "PLAIN user name and password must not be empty",
        ));
    }
    if user.len() > MAX_FIELD || password.len() > MAX_FIELD || authzid.len() > MAX_FIELD {
        return Err(SaslError::Malformed("PLAIN field longer than 255 bytes"));
    }
    Ok(PlainMessage {
        authzid,
        user,
        password,
    })
}

/// Checks a PLAIN message against `users` and returns the authenticated user.
/// An authorization id other than the user itself is refused, as Kafka does.
pub fn verify(message: &[u8], users: &dyn CredentialStore) -> Result<String, SaslError> {
    let msg = parse(message)?;
    if !msg.authzid.is_empty() && msg.authzid != msg.user {
        return Err(SaslError::InvalidCredentials);
    }
    let Some(expected) = users.plain_password(msg.user) else {
        return Err(SaslError::InvalidCredentials);
    };
    if bool::from(expected.expose().as_bytes().ct_eq(msg.password.as_bytes())) {
        Ok(msg.user.to_owned())
    } else {
        Err(SaslError::InvalidCredentials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::StaticCredentials;

    #[test]
    fn client_message_matches_rfc_4616() {
        assert_eq!(
            client_message("tim", &Secret::new("tanstaaftanstaaf")),
            b"\0tim\0tanstaaftanstaaf"
        );
    }

    #[test]
    fn verify_accepts_only_the_right_password() {
        let mut users = StaticCredentials::default();
        users.add_plain("tim", Secret::new("tanstaaf"));
        assert_eq!(verify(b"\0tim\0tanstaaf", &users).unwrap(), "tim");
        assert_eq!(verify(b"tim\0tim\0tanstaaf", &users).unwrap(), "tim");
        assert_eq!(
            verify(b"\0tim\0wrong", &users),
            Err(SaslError::InvalidCredentials)
        );
        assert_eq!(
            verify(b"\0kim\0tanstaaf", &users),
            Err(SaslError::InvalidCredentials)
        );
        assert_eq!(
            verify(b"root\0tim\0tanstaaf", &users),
            Err(SaslError::InvalidCredentials)
        );
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            &b""[..],
            b"\0",
            b"\0tim",
            b"\0tim\0",
            b"\0\0pw",
            b"a\0b\0c\0d",
            b"\0\xff\0pw",
        ] {
            assert!(
                matches!(parse(bad), Err(SaslError::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}

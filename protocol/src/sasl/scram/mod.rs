//! SCRAM (RFC 5802) with SHA-256 (RFC 7677) and SHA-512, as Kafka uses it (KIP-84):
//! no channel binding (`n,,` header), no SASLprep (Kafka's own implementation uses the
//! UTF-8 bytes of the password as they are), iteration counts 4096–16384.
//!
//! - [`ScramCredential`]: what a broker stores: salt, iterations, StoredKey,
//!   ServerKey, never the password.
//! - [`ScramClient`] and [`ScramServer`]: the two halves of the exchange.
//! - `messages`: the attribute grammar and saslname escaping (`=2C`, `=3D`).

mod client;
mod messages;
mod server;

pub use client::ScramClient;
pub use server::ScramServer;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::{random_bytes, Mechanism, SaslError};

/// The fewest iterations either side accepts (Kafka's `ScramMechanism` minimum).
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations either side accepts (Kafka's `ScramMechanism` maximum); it
/// bounds the work a hostile server can ask of a client.
pub const MAX_ITERATIONS: u32 = 16384;
/// Bytes of randomness in a nonce (base64-encoded on the wire) and in a salt.
const RANDOM_LEN: usize = 24;

/// The hash function of a SCRAM mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScramHash {
    /// SHA-256: `SCRAM-SHA-256`.
    Sha256,
    /// SHA-512: `SCRAM-SHA-512`.
    Sha512,
}

impl ScramHash {
    /// The SASL mechanism that uses this hash.
    pub fn mechanism(self) -> Mechanism {
        match self {
            ScramHash::Sha256 => Mechanism::ScramSha256,
            ScramHash::Sha512 => Mechanism::ScramSha512,
        }
    }

    /// The mechanism's number in DescribeUserScramCredentials and
    /// AlterUserScramCredentials (KIP-554): 1 for SHA-256, 2 for SHA-512.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramHash::Sha256 => 1,
            ScramHash::Sha512 => 2,
        }
    }

    /// The hash a KIP-554 mechanism number names; `None` for 0 (unknown) and
    /// anything else.
    pub fn from_kafka_type(mechanism: i8) -> Option<ScramHash> {
        match mechanism {
            1 => Some(ScramHash::Sha256),
            2 => Some(ScramHash::Sha512),
            _ => None,
        }
    }

    /// RFC 5802's SaltedPassword, `Hi(password, salt, iterations)`, as
    /// AlterUserScramCredentials carries it. CPU-heavy (PBKDF2): run it off async
    /// workers. Errors when `iterations` is outside 4096–16384.
    pub fn salt_password(
        self,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<Vec<u8>, SaslError> {
        check_iterations(iterations)?;
        Ok(self.salted_password(password, salt, iterations))
    }

    /// `H(data)`.
    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `HMAC(key, data)`.
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length, so `new_from_slice` cannot fail.
        match self {
            ScramHash::Sha256 => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramHash::Sha512 => {
                let mut mac =
                    Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with HMAC of this hash.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            ScramHash::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }
}

/// The keys derived from a salted password (RFC 5802 section 3).
struct Keys {
    client_key: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl Keys {
    fn derive(hash: ScramHash, password: &[u8], salt: &[u8], iterations: u32) -> Keys {
        Keys::from_salted(hash, &hash.salted_password(password, salt, iterations))
    }

    fn from_salted(hash: ScramHash, salted: &[u8]) -> Keys {
        let client_key = hash.hmac(salted, b"Client Key");
        let stored_key = hash.hash(&client_key);
        let server_key = hash.hmac(salted, b"Server Key");
        Keys {
            client_key,
            stored_key,
            server_key,
        }
    }
}

/// What a broker stores for one SCRAM user: the salt, the iteration count, StoredKey
/// and ServerKey. The password itself is not kept, and `Debug` shows none of the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    hash: ScramHash,
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl ScramCredential {
    /// Derives a credential from `password` with a fresh random salt.
    /// Errors when `iterations` is outside 4096–16384 or randomness is unavailable.
    pub fn generate(
        hash: ScramHash,
        password: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, SaslError> {
        let mut salt = vec![0; RANDOM_LEN];
        random_bytes(&mut salt)?;
        ScramCredential::with_salt(hash, password, salt, iterations)
    }

    /// Derives a credential from `password` with the given salt.
    pub fn with_salt(
        hash: ScramHash,
        password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Result<ScramCredential, SaslError> {
        check_iterations(iterations)?;
        let keys = Keys::derive(hash, password, &salt, iterations);
        Ok(ScramCredential {
            hash,
            salt,
            iterations,
            stored_key: keys.stored_key,
            server_key: keys.server_key,
        })
    }

    /// A credential from a salted password (AlterUserScramCredentials): StoredKey
    /// and ServerKey are derived from it and the salted password is not kept.
    /// Errors when `iterations` is outside 4096–16384 or the salted password's
    /// length is not the hash's.
    pub fn from_salted_password(
        hash: ScramHash,
        salt: Vec<u8>,
        iterations: u32,
        salted_password: &[u8],
    ) -> Result<ScramCredential, SaslError> {
        check_iterations(iterations)?;
        if salted_password.len() != hash.hash(b"").len() || salt.is_empty() {
            return Err(SaslError::Malformed(
                "salted password length does not match the hash, or the salt is empty",
            ));
        }
        let keys = Keys::from_salted(hash, salted_password);
        Ok(ScramCredential {
            hash,
            salt,
            iterations,
            stored_key: keys.stored_key,
            server_key: keys.server_key,
        })
    }

    /// A credential from its stored parts (for example from Kafka's
    /// `salt=...,stored_key=...,server_key=...,iterations=...` form, base64 decoded).
    pub fn from_parts(
        hash: ScramHash,
        salt: Vec<u8>,
        iterations: u32,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
    ) -> Result<ScramCredential, SaslError> {
        check_iterations(iterations)?;
        let len = hash.hash(b"").len();
        if stored_key.len() != len || server_key.len() != len {
            return Err(SaslError::Malformed(
                "SCRAM key length does not match the hash",
            ));
        }
        Ok(ScramCredential {
            hash,
            salt,
            iterations,
            stored_key,
            server_key,
        })
    }

    /// The hash this credential was derived with.
    pub fn hash(&self) -> ScramHash {
        self.hash
    }

    /// The iteration count.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The salt.
    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    /// StoredKey, `H(ClientKey)`: what a server checks a client proof against. It
    /// cannot log in by itself, but it allows an offline guess at the password, so
    /// it is kept as carefully as the rest of the store (and never printed).
    pub fn stored_key(&self) -> &[u8] {
        &self.stored_key
    }

    /// ServerKey: what a server signs its final message with.
    pub fn server_key(&self) -> &[u8] {
        &self.server_key
    }
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("hash", &self.hash)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Fresh random bytes for a SCRAM salt.
pub fn random_salt() -> Result<Vec<u8>, SaslError> {
    let mut salt = vec![0; RANDOM_LEN];
    random_bytes(&mut salt)?;
    Ok(salt)
}

fn check_iterations(iterations: u32) -> Result<(), SaslError> {
    if (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        Ok(())
    } else {
        Err(SaslError::IterationsOutOfRange(iterations))
    }
}

/// A fresh printable nonce (base64 of random bytes, so it never holds a comma).
fn new_nonce() -> Result<String, SaslError> {
    let mut raw = [0; RANDOM_LEN];
    random_bytes(&mut raw)?;
    Ok(BASE64.encode(raw))
}

/// `a XOR b` for equal-length slices.
fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// Constant-time equality of two byte strings.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    //! RFC 7677's SCRAM-SHA-256 example (user `user`, password `pencil`), driven
    //! through both halves with the nonces fixed.

    use super::*;
    use crate::sasl::StaticCredentials;

    const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_credential() -> ScramCredential {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        ScramCredential::with_salt(ScramHash::Sha256, b"pencil", salt, 4096).unwrap()
    }

    #[test]
    fn a_credential_from_the_salted_password_equals_one_from_the_password() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = ScramHash::Sha256
            .salt_password(b"pencil", &salt, 4096)
            .unwrap();
        let from_salted =
            ScramCredential::from_salted_password(ScramHash::Sha256, salt.clone(), 4096, &salted)
                .unwrap();
        assert_eq!(from_salted, rfc_credential());
        assert!(ScramHash::Sha256
            .salt_password(b"pencil", &salt, 4095)
            .is_err());
        assert!(
            ScramCredential::from_salted_password(ScramHash::Sha512, salt, 4096, &salted).is_err(),
            "a SHA-256 salted password is too short for SHA-512"
        );
        for hash in [ScramHash::Sha256, ScramHash::Sha512] {
            assert_eq!(ScramHash::from_kafka_type(hash.kafka_type()), Some(hash));
        }
        assert_eq!(ScramHash::from_kafka_type(0), None);
    }

    #[test]
    fn rfc_7677_client() {
        let mut client = ScramClient::with_nonce(
            ScramHash::Sha256,
            "user",
            b"pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(client.client_first(), CLIENT_FIRST.as_bytes());
        let client_final = client.handle_server_first(SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(std::str::from_utf8(&client_final).unwrap(), CLIENT_FINAL);
        client.handle_server_final(SERVER_FINAL.as_bytes()).unwrap();
    }

    #[test]
    fn rfc_7677_server() {
        let mut users = StaticCredentials::default();
        users.add_scram(ScramHash::Sha256, "user", rfc_credential());
        let mut server =
            ScramServer::with_nonce(ScramHash::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into());
        let first = server
            .handle_client_first(CLIENT_FIRST.as_bytes(), &users)
            .unwrap();
        assert_eq!(std::str::from_utf8(&first).unwrap(), SERVER_FIRST);
        let (user, last) = server.handle_client_final(CLIENT_FINAL.as_bytes()).unwrap();
        assert_eq!(user, "user");
        assert_eq!(std::str::from_utf8(&last).unwrap(), SERVER_FINAL);
    }

    #[test]
    fn wrong_server_signature_is_refused() {
        let mut client = ScramClient::with_nonce(
            ScramHash::Sha256,
            "user",
            b"pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        client.client_first();
        client.handle_server_first(SERVER_FIRST.as_bytes()).unwrap();
        let forged = "v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
        assert_eq!(
            client.handle_server_final(forged.as_bytes()),
            Err(SaslError::ServerSignatureMismatch)
        );
    }

    #[test]
    fn wrong_password_and_unknown_user_are_invalid_credentials() {
        let mut users = StaticCredentials::default();
        users.add_scram(ScramHash::Sha256, "user", rfc_credential());
        let mut client = ScramClient::with_nonce(
            ScramHash::Sha256,
            "user",
            b"pencil2",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        let mut server =
            ScramServer::with_nonce(ScramHash::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into());
        let first = server
            .handle_client_first(&client.client_first(), &users)
            .unwrap();
        let client_final = client.handle_server_first(&first).unwrap();
        assert_eq!(
            server.handle_client_final(&client_final).map(|_| ()),
            Err(SaslError::InvalidCredentials)
        );

        let mut server = ScramServer::new(ScramHash::Sha256).unwrap();
        assert_eq!(
            server
                .handle_client_first(b"n,,n=nobody,r=abc", &users)
                .map(|_| ()),
            Err(SaslError::InvalidCredentials)
        );
        // The SHA-512 mechanism does not see SHA-256 credentials.
        let mut server = ScramServer::new(ScramHash::Sha512).unwrap();
        assert_eq!(
            server
                .handle_client_first(b"n,,n=user,r=abc", &users)
                .map(|_| ()),
            Err(SaslError::InvalidCredentials)
        );
    }

    #[test]
    fn nonces_are_checked() {
        let mut client =
            ScramClient::with_nonce(ScramHash::Sha256, "user", b"pencil", "abc".into());
        client.client_first();
        assert_eq!(
            client.handle_server_first(b"r=xyzdef,s=QUJD,i=4096"),
            Err(SaslError::NonceMismatch)
        );
        let mut client =
            ScramClient::with_nonce(ScramHash::Sha256, "user", b"pencil", "abc".into());
        client.client_first();
        assert_eq!(
            client.handle_server_first(b"r=abc,s=QUJD,i=4096"),
            Err(SaslError::NonceMismatch),
            "the server must add its own part"
        );

        let mut users = StaticCredentials::default();
        users.add_scram(ScramHash::Sha256, "user", rfc_credential());
        let mut server = ScramServer::with_nonce(ScramHash::Sha256, "srv".into());
        server
            .handle_client_first(b"n,,n=user,r=abc", &users)
            .unwrap();
        assert_eq!(
            server
                .handle_client_final(b"c=biws,r=abcother,p=AAAA")
                .map(|_| ()),
            Err(SaslError::NonceMismatch)
        );
    }

    #[test]
    fn client_bounds_iterations() {
        for i in ["4095", "16385", "4294967295"] {
            let mut client = ScramClient::with_nonce(ScramHash::Sha512, "u", b"p", "abc".into());
            client.client_first();
            let msg = format!("r=abcdef,s=QUJD,i={i}");
            assert!(matches!(
                client.handle_server_first(msg.as_bytes()),
                Err(SaslError::IterationsOutOfRange(_))
            ));
        }
    }

    #[test]
    fn both_hashes_complete_with_escaped_names() {
        for hash in [ScramHash::Sha256, ScramHash::Sha512] {
            let name = "a,b=c";
            let mut users = StaticCredentials::default();
            users.add_scram(
                hash,
                name,
                ScramCredential::generate(hash, b"pw", 4096).unwrap(),
            );
            let mut client = ScramClient::new(hash, name, b"pw").unwrap();
            let mut server = ScramServer::new(hash).unwrap();
            let first = client.client_first();
            assert!(std::str::from_utf8(&first)
                .unwrap()
                .contains("n=a=2Cb=3Dc,"));
            let server_first = server.handle_client_first(&first, &users).unwrap();
            let client_final = client.handle_server_first(&server_first).unwrap();
            let (user, server_final) = server.handle_client_final(&client_final).unwrap();
            assert_eq!(user, name);
            client.handle_server_final(&server_final).unwrap();
        }
    }

    #[test]
    fn credential_debug_is_redacted() {
        let text = format!("{:?}", rfc_credential());
        assert!(!text.contains("stored") && !text.contains("salt"), "{text}");
    }
}

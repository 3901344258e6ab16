//! User lists in property values: PLAIN users in a `sasl.jaas.config` value
//! (`org.apache.kafka.common.security.plain.PlainLoginModule required
//! user_alice="secret";`) and SCRAM users in `scram.users`.
//!
//! `scram.users` is Baton's own property (Kafka creates SCRAM users with
//! `kafka-storage format --add-scram` or AlterUserScramCredentials): a
//! comma-separated list of `MECHANISM:user=password`, for example
//! `SCRAM-SHA-512:alice=alice-secret,SCRAM-SHA-256:bob=bob-secret`. The password
//! is everything after the first `=` of its entry, so it cannot hold a comma.
//! Error messages never quote a password.

use baton_protocol::sasl::Mechanism;

/// The JAAS login module whose `user_<name>` options are PLAIN users.
pub(crate) const PLAIN_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.plain.PlainLoginModule";

/// A user and password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub name: String,
    pub password: String,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The PLAIN users of a `PlainLoginModule` JAAS entry. `username` and
/// `password` (the broker's own credentials for connecting to other brokers) are
/// accepted and not used; any other option is an error.
pub(crate) fn plain_jaas_users(value: &str) -> Result<Vec<User>, String> {
    let mut rest = value.trim();
    let module = take_word(&mut rest);
    if module != PLAIN_LOGIN_MODULE {
        return Err(format!(
            "login module {module:?} is not supported (only {PLAIN_LOGIN_MODULE})"
        ));
    }
    let flag = take_word(&mut rest);
    if !matches!(flag, "required" | "requisite" | "sufficient" | "optional") {
        return Err(format!(
            "expected a control flag (required, requisite, sufficient, optional) after the module, found {flag:?}"
        ));
    }
    let mut users = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(';') {
            if !after.trim().is_empty() {
                return Err("only one login module entry is supported".into());
            }
            return Ok(users);
        }
        if rest.is_empty() {
            return Err("the JAAS entry does not end with ';'".into());
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| "an option is not name=value".to_string())?;
        let name = rest[..eq].trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("malformed option name {name:?}"));
        }
        rest = rest[eq + 1..].trim_start();
        let option_value = if let Some(quoted) = rest.strip_prefix('"') {
            let close = quoted
                .find('"')
                .ok_or_else(|| format!("option {name}: unclosed quote"))?;
            let v = &quoted[..close];
            rest = &quoted[close + 1..];
            v
        } else {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == ';')
                .unwrap_or(rest.len());
            let v = &rest[..end];
            rest = &rest[end..];
            v
        };
        match name.strip_prefix("user_") {
            Some(user) if !user.is_empty() => {
                if users.iter().any(|u: &User| u.name == user) {
                    return Err(format!("user {user} is given twice"));
                }
                users.push(User {
                    name: user.to_owned(),
                    password: option_value.to_owned(),
                });
            }
            _ if name == "username" || name == "password" => {}
            _ => return Err(format!("unknown option {name}")),
        }
    }
}

fn take_word<'a>(rest: &mut &'a str) -> &'a str {
    let s = rest.trim_start();
    let end = s
        .find(|c: char| c.is_whitespace() || c == ';')
        .unwrap_or(s.len());
    *rest = &s[end..];
    &s[..end]
}

/// The users of a `scram.users` value, with their mechanisms.
pub(crate) fn scram_users(value: &str) -> Result<Vec<(Mechanism, User)>, String> {
    let mut out: Vec<(Mechanism, User)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (mechanism, credential) = entry
            .split_once(':')
            .ok_or_else(|| "an entry is not MECHANISM:user=password".to_string())?;
        let mechanism = match Mechanism::from_name(mechanism.trim()) {
            Some(m) if m.scram_hash().is_some() => m,
            _ => {
                return Err(format!(
                    "{:?} is not a SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512)",
                    mechanism.trim()
                ))
            }
        };
        let (name, password) = credential
            .split_once('=')
            .ok_or_else(|| format!("the {mechanism} entry is not MECHANISM:user=password"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("a {mechanism} entry has no user name"));
        }
        if out.iter().any(|(m, u)| *m == mechanism && u.name == name) {
            return Err(format!("{mechanism} user {name} is given twice"));
        }
        out.push((
            mechanism,
            User {
                name: name.to_owned(),
                password: password.to_owned(),
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_users_from_a_jaas_entry() {
        let users = plain_jaas_users(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice=alice-secret;"#,
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users[1].name, "alice");
        assert_eq!(users[1].password, "alice-secret");
        assert!(!format!("{users:?}").contains("secret"));
    }

    #[test]
    fn malformed_jaas_entries_are_errors_without_passwords() {
        for bad in [
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "org.apache.kafka.common.security.plain.PlainLoginModule always;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"s3cret",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=s3cret",
            "org.apache.kafka.common.security.plain.PlainLoginModule required debug=s3cret;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=s3cret user_a=s3cret;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required; other required;",
        ] {
            let err = plain_jaas_users(bad).unwrap_err();
            assert!(!err.contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn scram_user_lists() {
        let users =
            scram_users("SCRAM-SHA-512:alice=a=b, SCRAM-SHA-256:bob=pw,SCRAM-SHA-512:bob=x")
                .unwrap();
        assert_eq!(users.len(), 3);
        assert_eq!(users[0].0, Mechanism::ScramSha512);
        assert_eq!(users[0].1.password, "a=b");
        for bad in [
            "PLAIN:alice=s3cret",
            "SCRAM-SHA-512:alice",
            "alice=s3cret",
            "SCRAM-SHA-512:=s3cret",
            "SCRAM-SHA-512:a=s3cret,SCRAM-SHA-512:a=s3cret",
        ] {
            let err = scram_users(bad).unwrap_err();
            assert!(!err.contains("s3cret"), "{bad}: {err}");
        }
    }
}

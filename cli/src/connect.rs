//! Builds the SDK's [`Client`] from the connection and security options, checking
//! that they fit together before anything is dialled.

use std::time::Duration;

use baton_kafka::{Client, SaslCredentials, SaslMechanism, SecurityProtocol, TlsConfig};

use crate::args::{ConnectionArgs, MechanismArg, SecurityArg};
use crate::error::{CliError, Status};

/// The bootstrap servers of `-b`, split at commas.
fn bootstrap(args: &ConnectionArgs) -> Result<Vec<String>, CliError> {
    let servers: Vec<String> = args
        .bootstrap
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if servers.is_empty() {
        return Err(CliError::usage("no bootstrap servers given")
            .hint("pass -b HOST:PORT or set BATON_BOOTSTRAP"));
    }
    Ok(servers)
}

fn protocol(arg: SecurityArg) -> SecurityProtocol {
    match arg {
        SecurityArg::Plaintext => SecurityProtocol::Plaintext,
        SecurityArg::Ssl => SecurityProtocol::Ssl,
        SecurityArg::SaslPlaintext => SecurityProtocol::SaslPlaintext,
        SecurityArg::SaslSsl => SecurityProtocol::SaslSsl,
    }
}

fn mechanism(arg: MechanismArg) -> SaslMechanism {
    match arg {
        MechanismArg::Plain => SaslMechanism::Plain,
        MechanismArg::ScramSha256 => SaslMechanism::ScramSha256,
        MechanismArg::ScramSha512 => SaslMechanism::ScramSha512,
        MechanismArg::OAuthBearer => SaslMechanism::OAuthBearer,
    }
}

/// The SASL password: the option (or its environment variable) or the first line
/// of the password file.
fn password(args: &ConnectionArgs) -> Result<Option<String>, CliError> {
    if let Some(p) = &args.sasl_password {
        return Ok(Some(p.clone()));
    }
    let Some(path) = &args.sasl_password_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--sasl-password-file {}: {e}", path.display())))?;
    Ok(Some(text.lines().next().unwrap_or_default().to_owned()))
}

/// The SASL credentials, if the protocol uses SASL.
fn sasl(args: &ConnectionArgs, uses_sasl: bool) -> Result<Option<SaslCredentials>, CliError> {
    let given = args.sasl_mechanism.is_some()
        || args.sasl_username.is_some()
        || args.sasl_password.is_some()
        || args.sasl_password_file.is_some();
    if !uses_sasl {
        return if given {
            Err(CliError::usage(
                "SASL options need --security-protocol SASL_PLAINTEXT or SASL_SSL",
            ))
        } else {
            Ok(None)
        };
    }
    let mech = mechanism(args.sasl_mechanism.unwrap_or(MechanismArg::Plain));
    let password = password(args)?.ok_or_else(|| {
        CliError::usage(format!("{mech} needs a password"))
            .hint("set BATON_SASL_PASSWORD or pass --sasl-password-file FILE")
    })?;
    let user = match (&args.sasl_username, mech) {
        (Some(u), _) => u.clone(),
        (None, SaslMechanism::OAuthBearer) => String::new(),
        (None, _) => {
            return Err(CliError::usage(format!("{mech} needs a user name"))
                .hint("pass --sasl-username USER or set BATON_SASL_USERNAME"))
        }
    };
    Ok(Some(SaslCredentials::new(mech, user, password)))
}

/// The TLS settings, if the protocol uses TLS.
fn tls(args: &ConnectionArgs, uses_tls: bool) -> Result<Option<TlsConfig>, CliError> {
    let given = args.ca_file.is_some() || args.cert_file.is_some();
    if !uses_tls {
        return if given {
            Err(CliError::usage(
                "--ca-file and --cert-file need --security-protocol SSL or SASL_SSL",
            ))
        } else {
            Ok(None)
        };
    }
    let bad = |what: &str, e: &dyn std::fmt::Display| CliError::usage(format!("{what}: {e}"));
    let mut config = match &args.ca_file {
        Some(ca) => TlsConfig::with_ca_pem_file(ca).map_err(|e| bad("--ca-file", &e))?,
        None => TlsConfig::system_roots(),
    };
    if let (Some(cert), Some(key)) = (&args.cert_file, &args.key_file) {
        config = config
            .client_cert_pem_files(cert, key)
            .map_err(|e| bad("--cert-file/--key-file", &e))?;
    }
    Ok(Some(config))
}

/// A client on the cluster of `args`, with metadata loaded.
pub async fn connect(args: &ConnectionArgs) -> Result<Client, CliError> {
    let servers = bootstrap(args)?;
    let protocol = protocol(args.security_protocol.unwrap_or(SecurityArg::Plaintext));
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut builder = Client::builder(servers)
        .client_id(args.client_id.clone())
        .request_timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .security_protocol(protocol);
    if let Some(creds) = sasl(args, protocol.uses_sasl())? {
        builder = builder.sasl(creds);
    }
    if let Some(config) = tls(args, protocol.uses_tls())? {
        builder = builder.tls(config);
    }
    builder.build().await.map_err(|e| {
        let mut err = CliError::from(e);
        if err.status != Status::Usage {
            err.status = Status::Unreachable;
        }
        err
    })
}

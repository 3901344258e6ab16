//! [`RequestContext`]: who sent a request and from where, the same for every
//! request of one connection.

use std::net::IpAddr;
use std::sync::Arc;

/// The principal of a connection that did not authenticate (Kafka's
/// `KafkaPrincipal.ANONYMOUS`).
pub(crate) const ANONYMOUS: &str = "User:ANONYMOUS";

/// The principal and client address of a connection's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestContext {
    /// `User:<SASL name>`, `User:<certificate subject DN>` or `User:ANONYMOUS`.
    pub principal: Arc<str>,
    /// The client's IP address as text, matched against ACL hosts.
    pub host: Arc<str>,
}

impl RequestContext {
    /// The context of requests from `principal` at `addr`.
    pub(crate) fn new(principal: &str, addr: IpAddr) -> RequestContext {
        RequestContext {
            principal: principal.into(),
            host: addr.to_string().into(),
        }
    }

    /// An unauthenticated connection from `addr`.
    pub(crate) fn anonymous(addr: IpAddr) -> RequestContext {
        RequestContext::new(ANONYMOUS, addr)
    }
}

//! The ACL vocabulary shared by the client's admin API and the broker's
//! authorizer: resource types, pattern types, operations, permissions, bindings
//! and binding filters, with the wire codes of Kafka's `ResourceType`,
//! `PatternType`, `AclOperation` and `AclPermissionType` (KIP-140, KIP-290).
//!
//! A code this crate does not know decodes to `None` (Kafka's `UNKNOWN`); the
//! conversions from wire structs report which field was wrong as an [`AclError`].

use crate::messages::{
    AclCreation, AclDescription, DeleteAclsFilter, DeleteAclsMatchingAcl, DescribeAclsRequest,
};

/// Declares a code-carrying enum with `code()` and `from_code()`.
macro_rules! acl_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $kafka:literal ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $( $name::$variant => $code, )* }
            }

            /// The value of a wire code, or `None` for a code Kafka calls UNKNOWN.
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $( $code => Some($name::$variant), )* _ => None }
            }

            /// Kafka's name for it (`TOPIC`, `PREFIXED`, `READ`...).
            pub fn name(self) -> &'static str {
                match self { $( $name::$variant => $kafka, )* }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

acl_enum! {
    /// The kind of resource an ACL protects.
    pub enum ResourceType {
        /// Any type (filters only).
        Any = 1 => "ANY",
        /// A topic.
        Topic = 2 => "TOPIC",
        /// A consumer group.
        Group = 3 => "GROUP",
        /// The cluster (one resource, named `kafka-cluster`).
        Cluster = 4 => "CLUSTER",
        /// A transactional id.
        TransactionalId = 5 => "TRANSACTIONAL_ID",
    }
}

acl_enum! {
    /// How an ACL's resource name is matched.
    pub enum PatternType {
        /// Any pattern type (filters only).
        Any = 1 => "ANY",
        /// Every pattern that would match the filter's name: the literal name, the
        /// literal `*`, and prefixes of it (filters only).
        Match = 2 => "MATCH",
        /// The name exactly, or every resource when the name is `*`.
        Literal = 3 => "LITERAL",
        /// Every resource whose name starts with the pattern's name.
        Prefixed = 4 => "PREFIXED",
    }
}

acl_enum! {
    /// What a principal does to a resource.
    pub enum AclOperation {
        /// Any operation (filters only).
        Any = 1 => "ANY",
        /// Every operation.
        All = 2 => "ALL",
        /// Read (fetch, consume in a group).
        Read = 3 => "READ",
        /// Write (produce).
        Write = 4 => "WRITE",
        /// Create (topics).
        Create = 5 => "CREATE",
        /// Delete (topics, groups).
        Delete = 6 => "DELETE",
        /// Alter (ACLs on the cluster).
        Alter = 7 => "ALTER",
        /// Describe.
        Describe = 8 => "DESCRIBE",
        /// Inter-broker actions (replica fetches).
        ClusterAction = 9 => "CLUSTER_ACTION",
        /// Describe configs.
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        /// Alter configs.
        AlterConfigs = 11 => "ALTER_CONFIGS",
        /// Idempotent produce (a producer id from InitProducerId).
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
    }
}

acl_enum! {
    /// Whether an ACL allows or denies.
    pub enum AclPermissionType {
        /// Either (filters only).
        Any = 1 => "ANY",
        /// Denies; a matching deny wins over every allow.
        Deny = 2 => "DENY",
        /// Allows.
        Allow = 3 => "ALLOW",
    }
}

/// The name of the one cluster resource.
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";
/// The resource name (literal) and principal name that match every name.
pub const WILDCARD: &str = "*";
/// The principal matching every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// A resource pattern: the type, a name and how the name matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    /// The resource type (never `Any`).
    pub resource_type: ResourceType,
    /// The name, `*` (literal) or a prefix.
    pub name: String,
    /// `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
}

/// Who may (or may not) do what from where.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    /// The principal, `User:<name>` or `User:*`.
    pub principal: String,
    /// The client host, an IP address or `*`.
    pub host: String,
    /// The operation (never `Any`).
    pub operation: AclOperation,
    /// `Allow` or `Deny`.
    pub permission_type: AclPermissionType,
}

/// One ACL: a resource pattern and an entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The resources it applies to.
    pub pattern: ResourcePattern,
    /// Who, from where, what, allowed or denied.
    pub entry: AccessControlEntry,
}

/// Selects ACLs by every field of a binding; `None` names and the `Any` values
/// match everything.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AclBindingFilter {
    /// The resource type, or `Any`.
    pub resource_type: ResourceType,
    /// The resource name, or `None` for any.
    pub name: Option<String>,
    /// The pattern type: `Any`, `Match`, `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
    /// The principal, or `None` for any.
    pub principal: Option<String>,
    /// The host, or `None` for any.
    pub host: Option<String>,
    /// The operation, or `Any`.
    pub operation: AclOperation,
    /// The permission type, or `Any`.
    pub permission_type: AclPermissionType,
}

impl AclBindingFilter {
    /// The filter matching every ACL.
    pub fn any() -> AclBindingFilter {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        }
    }
}

/// Why a wire ACL or filter is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AclError {
    /// A code this crate does not know (Kafka's UNKNOWN), or one only filters use.
    #[error("invalid {field} code {code}")]
    InvalidCode {
        /// Which field.
        field: &'static str,
        /// The code received.
        code: i8,
    },
    /// An ACL with an empty resource name.
    #[error("resource name should not be empty")]
    EmptyName,
    /// A principal without a `Type:` prefix.
    #[error("invalid principal {0:?}: expected Type:name, such as User:alice")]
    InvalidPrincipal(String),
}

fn code<T>(field: &'static str, code: i8, from: fn(i8) -> Option<T>) -> Result<T, AclError> {
    from(code).ok_or(AclError::InvalidCode { field, code })
}

impl AclBinding {
    /// The binding a CreateAcls creation asks for, checked as Kafka checks a new
    /// ACL: a concrete resource type, operation and permission, a literal or
    /// prefixed pattern, a non-empty name and a `Type:name` principal.
    pub fn from_creation(c: &AclCreation) -> Result<AclBinding, AclError> {
        let binding = AclBinding {
            pattern: ResourcePattern {
                resource_type: code("resource type", c.resource_type, ResourceType::from_code)?,
                name: c.resource_name.clone(),
                pattern_type: code(
                    "pattern type",
                    c.resource_pattern_type,
                    PatternType::from_code,
                )?,
            },
            entry: AccessControlEntry {
                principal: c.principal.clone(),
                host: c.host.clone(),
                operation: code("operation", c.operation, AclOperation::from_code)?,
                permission_type: code(
                    "permission type",
                    c.permission_type,
                    AclPermissionType::from_code,
                )?,
            },
        };
        binding.validate()?;
        Ok(binding)
    }

    /// Checks that this is a binding that can be stored (see
    /// [`from_creation`](Self::from_creation)).
    pub fn validate(&self) -> Result<(), AclError> {
        let p = &self.pattern;
        let e = &self.entry;
        if p.resource_type == ResourceType::Any {
            return Err(AclError::InvalidCode {
                field: "resource type",
                code: p.resource_type.code(),
            });
        }
        if !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return Err(AclError::InvalidCode {
                field: "pattern type",
                code: p.pattern_type.code(),
            });
        }
        if e.operation == AclOperation::Any {
            return Err(AclError::InvalidCode {
                field: "operation",
                code: e.operation.code(),
            });
        }
        if e.permission_type == AclPermissionType::Any {
            return Err(AclError::InvalidCode {
                field: "permission type",
                code: e.permission_type.code(),
            });
        }
        if p.name.is_empty() {
            return Err(AclError::EmptyName);
        }
        match e.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
            _ => Err(AclError::InvalidPrincipal(e.principal.clone())),
        }
    }

    /// The CreateAcls creation for this binding.
    pub fn to_creation(&self) -> AclCreation {
        AclCreation {
            resource_type: self.pattern.resource_type.code(),
            resource_name: self.pattern.name.clone(),
            resource_pattern_type: self.pattern.pattern_type.code(),
            principal: self.entry.principal.clone(),
            host: self.entry.host.clone(),
            operation: self.entry.operation.code(),
            permission_type: self.entry.permission_type.code(),
        }
    }

    /// The DescribeAcls description of this binding's entry.
    pub fn to_description(&self) -> AclDescription {
        AclDescription {
            principal: self.entry.principal.clone(),
            host: self.entry.host.clone(),
            operation: self.entry.operation.code(),
            permission_type: self.entry.permission_type.code(),
        }
    }

    /// The binding described by a DescribeAcls resource and one of its ACLs.
    pub fn from_description(
        resource_type: i8,
        name: &str,
        pattern_type: i8,
        d: &AclDescription,
    ) -> Result<AclBinding, AclError> {
        Ok(AclBinding {
            pattern: ResourcePattern {
                resource_type: code("resource type", resource_type, ResourceType::from_code)?,
                name: name.to_owned(),
                pattern_type: code("pattern type", pattern_type, PatternType::from_code)?,
            },
            entry: AccessControlEntry {
                principal: d.principal.clone(),
                host: d.host.clone(),
                operation: code("operation", d.operation, AclOperation::from_code)?,
                permission_type: code(
                    "permission type",
                    d.permission_type,
                    AclPermissionType::from_code,
                )?,
            },
        })
    }

    /// The DeleteAcls answer naming this binding as deleted.
    pub fn to_matching_acl(&self) -> DeleteAclsMatchingAcl {
        DeleteAclsMatchingAcl {
            error_code: 0,
            error_message: None,
            resource_type: self.pattern.resource_type.code(),
            resource_name: self.pattern.name.clone(),
            pattern_type: self.pattern.pattern_type.code(),
            principal: self.entry.principal.clone(),
            host: self.entry.host.clone(),
            operation: self.entry.operation.code(),
            permission_type: self.entry.permission_type.code(),
        }
    }

    /// The binding a DeleteAcls answer names.
    pub fn from_matching_acl(m: &DeleteAclsMatchingAcl) -> Result<AclBinding, AclError> {
        let d = AclDescription {
            principal: m.principal.clone(),
            host: m.host.clone(),
            operation: m.operation,
            permission_type: m.permission_type,
        };
        AclBinding::from_description(m.resource_type, &m.resource_name, m.pattern_type, &d)
    }
}

impl AclBindingFilter {
    /// The filter of a DescribeAcls request.
    pub fn from_describe(r: &DescribeAclsRequest) -> Result<AclBindingFilter, AclError> {
        AclBindingFilter::from_delete(&DeleteAclsFilter {
            resource_type_filter: r.resource_type_filter,
            resource_name_filter: r.resource_name_filter.clone(),
            pattern_type_filter: r.pattern_type_filter,
            principal_filter: r.principal_filter.clone(),
            host_filter: r.host_filter.clone(),
            operation: r.operation,
            permission_type: r.permission_type,
        })
    }

    /// A filter of a DeleteAcls request.
    pub fn from_delete(f: &DeleteAclsFilter) -> Result<AclBindingFilter, AclError> {
        Ok(AclBindingFilter {
            resource_type: code(
                "resource type",
                f.resource_type_filter,
                ResourceType::from_code,
            )?,
            name: f.resource_name_filter.clone(),
            pattern_type: code(
                "pattern type",
                f.pattern_type_filter,
                PatternType::from_code,
            )?,
            principal: f.principal_filter.clone(),
            host: f.host_filter.clone(),
            operation: code("operation", f.operation, AclOperation::from_code)?,
            permission_type: code(
                "permission type",
                f.permission_type,
                AclPermissionType::from_code,
            )?,
        })
    }

    /// The DescribeAcls request for this filter.
    pub fn to_describe(&self) -> DescribeAclsRequest {
        DescribeAclsRequest {
            resource_type_filter: self.resource_type.code(),
            resource_name_filter: self.name.clone(),
            pattern_type_filter: self.pattern_type.code(),
            principal_filter: self.principal.clone(),
            host_filter: self.host.clone(),
            operation: self.operation.code(),
            permission_type: self.permission_type.code(),
        }
    }

    /// The DeleteAcls filter for this filter.
    pub fn to_delete(&self) -> DeleteAclsFilter {
        DeleteAclsFilter {
            resource_type_filter: self.resource_type.code(),
            resource_name_filter: self.name.clone(),
            pattern_type_filter: self.pattern_type.code(),
            principal_filter: self.principal.clone(),
            host_filter: self.host.clone(),
            operation: self.operation.code(),
            permission_type: self.permission_type.code(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for c in 1..=12 {
            assert_eq!(AclOperation::from_code(c).unwrap().code(), c);
        }
        assert_eq!(AclOperation::from_code(0), None);
        assert_eq!(ResourceType::from_code(6), None);
        assert_eq!(PatternType::from_code(4), Some(PatternType::Prefixed));
        assert_eq!(
            AclPermissionType::from_code(3),
            Some(AclPermissionType::Allow)
        );
    }

    #[test]
    fn creations_are_checked_as_kafka_checks_new_acls() {
        let good = AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: "t".into(),
                pattern_type: PatternType::Prefixed,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission_type: AclPermissionType::Allow,
            },
        };
        assert_eq!(
            AclBinding::from_creation(&good.to_creation()),
            Ok(good.clone())
        );
        let mut c = good.to_creation();
        c.resource_pattern_type = PatternType::Match.code();
        assert!(matches!(
            AclBinding::from_creation(&c),
            Err(AclError::InvalidCode {
                field: "pattern type",
                ..
            })
        ));
        let mut c = good.to_creation();
        c.operation = AclOperation::Any.code();
        assert!(AclBinding::from_creation(&c).is_err());
        let mut c = good.to_creation();
        c.principal = "alice".into();
        assert_eq!(
            AclBinding::from_creation(&c),
            Err(AclError::InvalidPrincipal("alice".into()))
        );
        let mut c = good.to_creation();
        c.resource_name.clear();
        assert_eq!(AclBinding::from_creation(&c), Err(AclError::EmptyName));
        let mut c = good.to_creation();
        c.resource_type = 0;
        assert!(AclBinding::from_creation(&c).is_err());
    }

    #[test]
    fn filters_round_trip_through_both_requests() {
        let f = AclBindingFilter {
            principal: Some("User:bob".into()),
            pattern_type: PatternType::Match,
            name: Some("orders".into()),
            ..AclBindingFilter::any()
        };
        assert_eq!(
            AclBindingFilter::from_describe(&f.to_describe()),
            Ok(f.clone())
        );
        assert_eq!(AclBindingFilter::from_delete(&f.to_delete()), Ok(f));
    }
}

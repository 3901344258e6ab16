//! The broker pool: at most one [`Connection`] per broker, opened lazily on first use
//! and replaced when it is poisoned.
//!
//! Brokers are known by node id (from metadata) and bootstrap servers by address.
//! Opening a connection to one broker is single-flight: concurrent callers wait for
//! the same attempt rather than dialling several sockets.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::Mutex as AsyncMutex;

use crate::connection::{Connection, ConnectionConfig, ConnectionError};
use crate::metrics::ConnectionMeter;

/// Where a pooled connection goes: a broker by node id, or a bootstrap address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum PoolKey {
    /// A broker known from metadata.
    Node(i32),
    /// A bootstrap server, before its node id is known.
    Bootstrap(String),
}

/// One pool entry; the async mutex makes opening the connection single-flight.
#[derive(Default)]
struct Slot {
    conn: AsyncMutex<Option<Connection>>,
}

/// Connections to the brokers of one cluster, shared by everything a `Client` does.
pub(crate) struct BrokerPool {
    config: ConnectionConfig,
    slots: Mutex<HashMap<PoolKey, Arc<Slot>>>,
    /// Counts the connections this pool opens and closes (shared by a client's
    /// pools).
    meter: Arc<ConnectionMeter>,
}

impl fmt::Debug for BrokerPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<PoolKey> = self
            .slots
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("BrokerPool").field("keys", &keys).finish()
    }
}

impl BrokerPool {
    pub(crate) fn new(config: ConnectionConfig) -> Self {
        let meter = ConnectionMeter::new(config.client_id.as_deref().unwrap_or(""));
        BrokerPool::counted_by(config, Arc::new(meter))
    }

    /// A pool whose connections count in `meter`.
    pub(crate) fn counted_by(config: ConnectionConfig, meter: Arc<ConnectionMeter>) -> Self {
        BrokerPool {
            config,
            slots: Mutex::new(HashMap::new()),
            meter,
        }
    }

    /// What counts this pool's connections.
    pub(crate) fn meter(&self) -> &Arc<ConnectionMeter> {
        &self.meter
    }

    pub(crate) fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// A healthy connection for `key` at `addr`, reusing the pooled one unless it is
    /// poisoned or points at another address (a broker that moved).
    ///
    /// Cancel safe: a dropped call leaves the slot empty or holding a complete
    /// connection.
    pub(crate) async fn get(
        &self,
        key: PoolKey,
        addr: &str,
    ) -> Result<Connection, ConnectionError> {
        let node_id = match key {
            PoolKey::Node(id) => id,
            PoolKey::Bootstrap(_) => -1,
        };
        let slot = {
            let mut slots = self.slots.lock().expect("pool lock poisoned");
            slots.entry(key).or_default().clone()
        };
        let mut guard = slot.conn.lock().await;
        if let Some(conn) = guard.as_ref() {
            if !conn.is_poisoned() && conn.addr() == addr {
                return Ok(conn.clone());
            }
        }
        *guard = None;
        let conn = match Connection::connect(addr, &self.config).await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::debug!(%addr, error = %e, "connecting failed");
                if matches!(e, ConnectionError::Authentication { .. }) {
                    self.meter.authentication_failed();
                }
                return Err(e);
            }
        };
        conn.set_node_id(node_id);
        self.meter.created();
        conn.count_close_in(self.meter.clone());
        *guard = Some(conn.clone());
        Ok(conn)
    }

    /// The pooled connection for `key` if one exists and is healthy, without dialling.
    pub(crate) fn existing(&self, key: &PoolKey) -> Option<Connection> {
        let slot = self
            .slots
            .lock()
            .expect("pool lock poisoned")
            .get(key)?
            .clone();
        let guard = slot.conn.try_lock().ok()?;
        guard.as_ref().filter(|c| !c.is_poisoned()).cloned()
    }

    /// Forgets connections to brokers not in `live` (called after a metadata refresh).
    pub(crate) fn retain_nodes(&self, live: &[i32]) {
        let mut slots = self.slots.lock().expect("pool lock poisoned");
        slots.retain(|k, _| match k {
            PoolKey::Node(id) => live.contains(id),
            PoolKey::Bootstrap(_) => true,
        });
    }
}

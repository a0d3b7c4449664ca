//! The gateway behind the downstreams' [`Sessions`] handle: its session registry.

use std::sync::Arc;

use crate::context::Session;
use crate::downstream::Sessions;
use crate::gateway::Gateway;

impl Sessions for Gateway {
    fn opened(&self, session: &Arc<Session>) {
        self.register_session(session);
    }

    fn ended(&self, id: &str) {
        self.remove_session(id);
    }
}

//! In-process servers ([`InProcess`]): a connection is a channel of messages, as a stdio
//! child's is, served by a task that calls the server's service or writes its stream.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use super::{Link, Upstream, stdio};
use crate::jsonrpc::{Kind as MessageKind, Message};
use crate::policy::InProcess;
use crate::policy::in_process::{Kind, MessageService};

/// One open connection to an in-process server: its tasks, ended when it closes.
#[derive(Debug)]
pub(crate) struct Connection {
    tasks: Vec<JoinHandle<()>>,
}

impl Connection {
    /// Opens a connection to `server` for `upstream`: the connection, the link its messages
    /// go down, and the task that ends (with the reason) when the server stops answering.
    pub(crate) fn open(
        upstream: &Upstream,
        server: &InProcess,
    ) -> (Self, Link, JoinHandle<String>) {
        let (tx, rx) = mpsc::unbounded_channel::<Message>();
        match server.kind() {
            Kind::Service(service) => {
                let ended = tokio::spawn(serve(upstream.clone(), service.clone(), rx));
                (Self { tasks: Vec::new() }, Link::Stdio(tx), ended)
            }
            Kind::Streams(connect) => {
                let (read, write) = connect();
                let writer = tokio::spawn(crate::jsonrpc::write_lines(rx, write));
                let reader = tokio::spawn(stdio::read(upstream.clone(), read));
                (
                    Self {
                        tasks: vec![writer],
                    },
                    Link::Stdio(tx),
                    reader,
                )
            }
        }
    }

    /// Ends the connection's tasks.
    pub(crate) fn close(self, ended: Option<JoinHandle<String>>) {
        for task in self.tasks {
            task.abort();
        }
        if let Some(ended) = ended {
            ended.abort();
        }
    }
}

/// Calls `service` with each message sent down, concurrently; each answer is what the server
/// said. Ends when the link is dropped.
async fn serve(
    upstream: Upstream,
    service: MessageService,
    mut rx: mpsc::UnboundedReceiver<Message>,
) -> String {
    while let Some(message) = rx.recv().await {
        let (upstream, service) = (upstream.clone(), service.clone());
        tokio::spawn(async move {
            let id = (message.kind() == MessageKind::Request).then(|| message.reply_id());
            let answer = match service.oneshot(message.to_value()).await {
                Ok(Some(answer)) => Message::from_value(&answer)
                    .map_err(|e| format!("its answer is no JSON-RPC message: {e}")),
                Ok(None) => return,
                Err(err) => Err(err.to_string()),
            };
            match (answer, id) {
                (Ok(answer), _) => upstream.incoming(answer, None),
                // The request fails now, not at the timeout.
                (Err(reason), Some(id)) => {
                    let err = upstream.unavailable(&reason);
                    upstream.incoming(Message::error(id, err.to_error_object()), None);
                }
                (Err(reason), None) => {
                    tracing::warn!(upstream = upstream.name(), %reason, "In-process server failed");
                }
            }
        });
    }
    "the connection was closed".to_owned()
}

//! The local stack's HTTP front: `POST /webhook` on loopback, served by the same
//! `WebhookHandler` the Lambda function runs (API Gateway's place, minus API Gateway).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use stages::webhook::{WebhookHandler, WebhookRequest, WebhookResponse};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub const WEBHOOK_PATH: &str = "/webhook";

/// A running HTTP/1.1 accept loop. Clones share it; dropping it does not stop it,
/// [`Serving::stop`] does.
#[derive(Clone)]
pub struct Serving {
    stop: Arc<watch::Sender<bool>>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Serving {
    /// Accepts on `listener` and serves each connection with `handle`, until stopped.
    pub fn spawn<F, Fut>(listener: TcpListener, handle: F) -> Serving
    where
        F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
    {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let handle = handle.clone();
                        connections.spawn(async move {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service_fn(handle))
                                .await;
                        });
                    }
                }
            }
            // Keep-alive connections (and hanging requests) would otherwise hold shutdown.
            connections.abort_all();
            while connections.join_next().await.is_some() {}
        });
        Serving {
            stop: Arc::new(stop),
            task: Arc::new(Mutex::new(Some(task))),
        }
    }

    /// Stops accepting and drops open connections.
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// The webhook server; dropping it does not stop it, [`ServerHandle::shutdown`] does.
pub struct ServerHandle {
    addr: SocketAddr,
    serving: Serving,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn webhook_url(&self) -> String {
        format!("http://{}{WEBHOOK_PATH}", self.addr)
    }

    /// Stops accepting and drops open connections.
    pub async fn shutdown(self) {
        self.serving.stop().await;
    }
}

/// Binds `addr` (use port 0 for any free port) and serves until shut down.
pub async fn serve(
    handler: Arc<WebhookHandler>,
    addr: SocketAddr,
) -> std::io::Result<ServerHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let serving = Serving::spawn(listener, move |req| route(handler.clone(), req));
    Ok(ServerHandle { addr, serving })
}

async fn route(
    handler: Arc<WebhookHandler>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() != WEBHOOK_PATH {
        return Ok(respond(&WebhookResponse::error(
            404,
            format!("no route; POST {WEBHOOK_PATH}"),
        )));
    }
    if req.method() != Method::POST {
        return Ok(respond(&WebhookResponse::error(
            405,
            format!("use POST {WEBHOOK_PATH}"),
        )));
    }
    let (parts, body) = req.into_parts();
    let limit = handler.max_body_bytes();
    // Read at most one byte past the cap, so an oversized body is refused without buffering it.
    let body = match Limited::new(body, limit + 1).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Ok(respond(&WebhookResponse::too_large(limit + 1, limit)));
        }
        Err(e) => {
            return Ok(respond(&WebhookResponse::error(
                400,
                format!("reading the request body failed: {e}"),
            )))
        }
    };
    let response = handler
        .handle(WebhookRequest {
            headers: parts.headers,
            body,
        })
        .await;
    Ok(respond(&response))
}

fn respond(response: &WebhookResponse) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(response.body.to_string())))
        .expect("static parts always build")
}

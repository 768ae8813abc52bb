//! The agent's loopback endpoint (tokio; one short HTTP/1.0 exchange per
//! connection), and the charm's side of it: one GET with std only, so a
//! hook reads the agent's state without any hook tool or runtime.

use super::state::AgentState;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a hook waits for the agent's answer, at most.
pub const GET_TIMEOUT: Duration = Duration::from_secs(2);

/// A status line, a content type and a body.
pub type Response = (&'static str, &'static str, String);

/// The response to `path` (status line, content type, body).
pub fn respond(path: &str, state: &AgentState) -> Response {
    match path {
        "/" | "/state" => (
            "200 OK",
            "application/json",
            serde_json::to_string_pretty(state).unwrap_or_else(|_| "{}".into()),
        ),
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", state.metrics()),
        _ => ("404 Not Found", "text/plain", "try / or /metrics\n".into()),
    }
}

/// Serves until the runtime ends.
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<Mutex<AgentState>>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            // Out of descriptors, say: do not spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        tokio::spawn(exchange(sock, state.clone(), respond));
    }
}

/// One request read (bounded) and answered by `route`, on a plain or a TLS
/// stream (the scrape listener shares it).
pub async fn exchange<S>(
    mut sock: S,
    state: Arc<Mutex<AgentState>>,
    route: fn(&str, &AgentState) -> Response,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    let read = tokio::time::timeout(GET_TIMEOUT, async {
        while len < buf.len() {
            match sock.read(&mut buf[len..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    if read.is_err() {
        return;
    }
    let req = String::from_utf8_lossy(&buf[..len]);
    let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
    let snapshot = state.lock().map(|s| s.clone()).unwrap_or_default();
    let (status, ctype, body) = route(&path, &snapshot);
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body.as_bytes()).await;
    let _ = sock.shutdown().await;
}

/// GET `path` from the agent at `addr` (`host:port`); the body of a 200.
pub fn get(addr: &str, path: &str) -> Result<String, String> {
    let sock_addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| format!("agent address {addr:?}: {e}"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock_addr, GET_TIMEOUT)
        .map_err(|e| format!("the maintenance agent at {addr} does not answer: {e}"))?;
    let _ = s.set_read_timeout(Some(GET_TIMEOUT));
    let _ = s.set_write_timeout(Some(GET_TIMEOUT));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .map_err(|e| format!("asking the maintenance agent at {addr}: {e}"))?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)
        .map_err(|e| format!("reading the maintenance agent at {addr}: {e}"))?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("the maintenance agent at {addr} sent no HTTP response"))?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "the maintenance agent at {addr} answered {}",
            head.lines().next().unwrap_or("")
        ));
    }
    Ok(body.to_string())
}

/// The agent's state, read by a hook.
pub fn get_state(addr: &str) -> Result<AgentState, String> {
    let body = get(addr, "/state")?;
    serde_json::from_str(&body).map_err(|e| format!("the maintenance agent's state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let s = AgentState::default();
        assert_eq!(respond("/", &s).0, "200 OK");
        assert_eq!(respond("/metrics", &s).1, "text/plain; version=0.0.4");
        assert_eq!(respond("/nope", &s).0, "404 Not Found");
    }

    #[test]
    fn a_get_reads_what_the_server_serves() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(Mutex::new(AgentState {
            unit: "etcd/7".into(),
            checks: 3,
            ..Default::default()
        }));
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            rt.block_on(async {
                let _ = tokio::time::timeout(Duration::from_secs(10), serve(listener, state)).await;
            })
        });
        let got = get_state(&addr).unwrap();
        assert_eq!((got.unit.as_str(), got.checks), ("etcd/7", 3));
        assert!(get(&addr, "/metrics")
            .unwrap()
            .contains("etcd_charm_agent_up"));
        assert!(get(&addr, "/x").unwrap_err().contains("404"));
        drop(server);
    }
}

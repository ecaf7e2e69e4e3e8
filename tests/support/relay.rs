//! What the recording proxies share: a request passed upstream with its headers (but its own
//! host and length), and the upstream answer passed back as it came (a transport failure as a
//! 502 naming it).

use bytes::Bytes;
use http::{HeaderMap, Response};
use http_body_util::Full;

/// `request` with the client's headers, except `Host` and `Content-Length` (reqwest sets both).
pub fn with_headers(
    mut request: reqwest::RequestBuilder,
    headers: &HeaderMap,
) -> reqwest::RequestBuilder {
    for (name, value) in headers {
        if name != http::header::HOST && name != http::header::CONTENT_LENGTH {
            request = request.header(name, value);
        }
    }
    request
}

/// The upstream answer as the proxy's response: status, headers (but length and transfer
/// encoding, which the body sets again) and body.
pub async fn answer(upstream: Result<reqwest::Response, reqwest::Error>) -> Response<Full<Bytes>> {
    let answer = match upstream {
        Ok(a) => a,
        Err(e) => {
            return Response::builder()
                .status(502)
                .body(Full::new(Bytes::from(e.to_string())))
                .unwrap()
        }
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
            response = response.header(name, value);
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    response.body(Full::new(bytes)).unwrap()
}

//! Answers of peers and services (a source drover, the drover beside a node, a savepoint
//! bucket, the daemon seen from the CLI), read within a bound. A peer decides how long its
//! answer is; drover decides how much of it it reads, holds, stores and logs. Every body read
//! off the network goes through here, so that no answer can grow the daemon, a task's record
//! or a log line by more than these bounds (docs/security.md).

use futures::StreamExt;
use serde::de::DeserializeOwned;

/// The longest text echoed back whole in an error message.
pub const MAX_ECHO: usize = 1000;

/// `text` cut to [`MAX_ECHO`] bytes (on a character boundary) with the full size said: errors
/// quote what they refuse, and a 5 MB keyspace name made a 5 MB response.
pub fn cap(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_ECHO {
        return text.into();
    }
    let mut end = MAX_ECHO;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len()).into()
}

/// How much of an error answer's body is read.
pub const ERROR_BODY_READ: usize = 4096;

/// How much of an error message taken from an answer is kept (and so logged, stored and
/// shown).
pub const ERROR_MESSAGE_CHARS: usize = 512;

/// The body of `response`, read up to `limit` bytes; `None` as soon as it would be longer
/// (what was read is dropped, the rest is never read).
pub async fn within(
    response: reqwest::Response,
    limit: u64,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if (body.len() as u64).saturating_add(chunk.len() as u64) > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The JSON answer of `response` as a `T`, read up to `limit` bytes; the error says which
/// bound was passed or why the answer is not a `T`, never what it held.
pub async fn json_within<T: DeserializeOwned>(
    response: reqwest::Response,
    limit: u64,
) -> Result<T, String> {
    let body = within(response, limit)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("an answer longer than {limit} bytes"))?;
    // serde's message may quote a value of the answer (`invalid type: string "…"`): clipped.
    serde_json::from_slice(&body)
        .map_err(|e| format!("not the answer expected: {}", clip(&e.to_string())))
}

/// What an error answer says: the `message` of its JSON body, else its text, from the first
/// [`ERROR_BODY_READ`] bytes (the rest is never read), clipped to [`ERROR_MESSAGE_CHARS`]
/// characters. A body that is not text (file bytes sent with an unexpected status) is not put
/// in a message that ends up in logs and task reports.
pub async fn error_message(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < ERROR_BODY_READ {
        match stream.next().await {
            Some(Ok(chunk)) => {
                let room = ERROR_BODY_READ - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    message_of(&body)
}

/// [`error_message`] of a body already read.
fn message_of(body: &[u8]) -> String {
    let text = match std::str::from_utf8(body) {
        Ok(text) => Some(text),
        // Cut inside a character by the read limit: text all the same.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&body[..e.valid_up_to()]).ok(),
        Err(_) => None,
    };
    match text {
        Some(text) => clip(
            &serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| {
                    v.get("message")
                        .and_then(|m| m.as_str())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| text.to_string()),
        ),
        None => format!("a body that is not text ({} bytes read)", body.len()),
    }
}

/// `text` cut to [`ERROR_MESSAGE_CHARS`] characters, with `…` when it was longer.
pub fn clip(text: &str) -> String {
    let mut chars = text.chars();
    let mut kept: String = chars.by_ref().take(ERROR_MESSAGE_CHARS).collect();
    if chars.next().is_some() {
        kept.push('…');
    }
    kept
}

/// The most characters of a URL or path an error message shows.
pub const SHOWN_URL_CHARS: usize = 200;

/// A URL or a path as an error message shows it to a human: its percent-escapes decoded
/// (`ks%2Ft` as `ks/t`, `%3A` as `:`, bytes that are no UTF-8 as U+FFFD), control characters
/// escaped, without the credentials of `user:password@`, and without query and fragment (they
/// may hold a token or a signature: `?…` says one was there); at most [`SHOWN_URL_CHARS`]
/// characters. Percent-escapes are for the wire, not for the operator who reads the message.
pub fn shown_url(url: &str) -> String {
    let (base, had_query) = match url.find(['?', '#']) {
        Some(at) => (&url[..at], true),
        None => (url, false),
    };
    let base = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => base.to_string(),
    };
    let decoded = percent_encoding::percent_decode_str(&base).decode_utf8_lossy();
    let mut out = String::new();
    for (n, c) in decoded.chars().enumerate() {
        if n == SHOWN_URL_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if had_query {
        out.push_str("?…");
    }
    out
}

/// `text` with each `http://` or `https://` URL in it as [`shown_url`] shows it: for the
/// messages of libraries (reqwest, object stores) that name the URL they asked, escaped.
pub fn shown_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|p| rest.find(p))
        .min()
    {
        out.push_str(&rest[..at]);
        let url = &rest[at..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ','))
            .unwrap_or(url.len());
        out.push_str(&shown_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

/// A reqwest error and its causes, as one line, the URL shown as [`shown_url`] does.
pub fn request_error_text(e: &reqwest::Error) -> String {
    let mut text = shown_urls_in(&e.to_string());
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = shown_urls_in(&cause.to_string());
        // hyper and reqwest repeat their inner error in their own message at times.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_its_bound_and_says_when_it_was_cut() {
        let at = "é".repeat(ERROR_MESSAGE_CHARS);
        assert_eq!(
            clip(&at),
            at,
            "a message of exactly the bound is kept whole"
        );
        let over = format!("{at}x");
        assert_eq!(clip(&over), format!("{at}…"), "one character more is cut");
    }

    #[test]
    fn an_error_body_gives_its_message_or_its_text_never_its_bytes() {
        assert_eq!(
            message_of(br#"{"message": "no such file"}"#),
            "no such file"
        );
        assert_eq!(message_of(b"plain words"), "plain words");
        assert_eq!(
            message_of(&[0xff, 0xfe, 0x00, 0x41]),
            "a body that is not text (4 bytes read)"
        );
        // Cut inside a character by the read bound: the text before it.
        assert_eq!(message_of("ab€".as_bytes()[..3].as_ref()), "ab");
        let long = "E".repeat(ERROR_BODY_READ);
        assert_eq!(
            message_of(long.as_bytes()).chars().count(),
            ERROR_MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn urls_are_shown_as_a_human_reads_them() {
        assert_eq!(
            shown_url("http://u:secret@h:9043/api/v1/jobs/a%2Fb%3Ac%20d?token=t#f"),
            "http://h:9043/api/v1/jobs/a/b:c d?…"
        );
        assert_eq!(
            shown_url("/api/v1/jobs/019a%2D77b2"),
            "/api/v1/jobs/019a-77b2"
        );
        assert_eq!(shown_url("/x%0Ay"), "/x\\ny");
        assert_eq!(shown_url("/%FF"), "/\u{fffd}");
        let long = format!("/{}", "a".repeat(500));
        assert_eq!(shown_url(&long).chars().count(), SHOWN_URL_CHARS + 1);
        assert_eq!(
            shown_urls_in(
                "Error performing GET http://127.0.0.1:9000/b?list-type=2&prefix=sp%2F in 1s (http://x/a%3Ab)"
            ),
            "Error performing GET http://127.0.0.1:9000/b?… in 1s (http://x/a:b)"
        );
        assert_eq!(shown_urls_in("no url here"), "no url here");
    }
}

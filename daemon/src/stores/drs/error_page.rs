//! What an error page says. Fence answers every error as an HTML page,
//! even to `Accept: application/json` (`fence/error_handler.py` renders
//! `fence/templates/error.html`, uc-cdis/fence 13.3.0, d03fe036): the
//! status code in `<title>` and an `<h1>`, its reason phrase in `<h2>`, an
//! "Error Identifier:" paragraph, and, for statuses under 500 only, an
//! "Error Message:" paragraph followed by the message (`No indexed document
//! found with id ...`). A proxy's page (`502 Bad Gateway`) says what it
//! says in `<title>` and `<h1>`; S3 answers XML, its words in `<Message>`.
//!
//! Read without a parser, as text between tags: scripts, styles and
//! comments dropped, the entities Jinja's escaping writes (and numeric
//! ones) decoded, blanks collapsed. A page is a server's text like any
//! other: the caller takes secrets out and quotes it.

/// The most characters of text one page is read for: a message is a line.
const MAX_TEXT: usize = 4096;

/// What a page says: its message, and the identifier Fence logged the
/// error under (what its operators ask for), when it gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PageSaid {
    pub message: String,
    pub id: Option<String>,
}

/// What the HTML (or XML) error page `body` says: the text after "Error
/// Message:", else S3's `<Message>`, else its heading (the first of
/// `<h2>`, `<title>`, `<h1>` that is more than a status code). `None` for a
/// body that is not markup or says nothing.
pub(super) fn page_message(body: &[u8]) -> Option<PageSaid> {
    let text = std::str::from_utf8(body)
        .ok()?
        .trim_start_matches('\u{feff}');
    if !text.trim_start().starts_with('<') {
        return None;
    }
    let blocks = blocks(text);
    let after = |label: &str| {
        blocks
            .windows(2)
            .find(|w| w[0].text.eq_ignore_ascii_case(label))
            .map(|w| w[1].text.clone())
    };
    let heading = || {
        ["h2", "title", "h1"].iter().find_map(|tag| {
            blocks
                .iter()
                .filter(|b| b.tag == *tag)
                .map(|b| b.text.clone())
                .find(|t| !t.chars().all(|c| c.is_ascii_digit()))
        })
    };
    let message = after("Error Message:")
        .or_else(|| s3_message(&blocks))
        .or_else(heading)?;
    let id = after("Error Identifier:").filter(|id| looks_like_an_id(id));
    Some(PageSaid { message, id })
}

/// S3's `<Code>` and `<Message>`: `Code: message`.
fn s3_message(blocks: &[Block]) -> Option<String> {
    let find = |tag: &str| blocks.iter().find(|b| b.tag == tag).map(|b| &b.text);
    let message = find("message")?;
    Some(match find("code") {
        Some(code) => format!("{code}: {message}"),
        None => message.clone(),
    })
}

/// A uuid or such: letters, digits and `-`, at most 64.
fn looks_like_an_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// A run of text between tags, and the tag it is in (the last opened,
/// lowercased; empty after a closing tag).
#[derive(Debug)]
struct Block {
    tag: String,
    text: String,
}

/// The text runs of `html`, each decoded and its blanks collapsed; empty
/// ones left out.
fn blocks(html: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut tag = String::new();
    let mut rest = html;
    let mut read = 0;
    while !rest.is_empty() && read < MAX_TEXT {
        let Some(open) = rest.find('<') else {
            push(&mut out, &tag, rest, &mut read);
            break;
        };
        push(&mut out, &tag, &rest[..open], &mut read);
        rest = &rest[open..];
        if let Some(skipped) = skip_unread(rest) {
            rest = skipped;
            continue;
        }
        let Some(close) = rest.find('>') else {
            break;
        };
        tag = tag_name(&rest[1..close]);
        rest = &rest[close + 1..];
    }
    out
}

fn push(out: &mut Vec<Block>, tag: &str, raw: &str, read: &mut usize) {
    let text = collapse(&decode(raw));
    if !text.is_empty() {
        *read += text.len();
        out.push(Block {
            tag: tag.to_string(),
            text,
        });
    }
}

/// `rest` (at a `<`) past a comment, a script or a style, whose insides
/// are not text; `None` at any other tag.
fn skip_unread(rest: &str) -> Option<&str> {
    if let Some(comment) = rest.strip_prefix("<!--") {
        return Some(comment.find("-->").map_or("", |end| &comment[end + 3..]));
    }
    for element in ["script", "style"] {
        let name = rest.get(1..1 + element.len())?;
        let ends_name =
            rest[1 + element.len()..].starts_with(|c: char| c == '>' || c.is_whitespace());
        if name.eq_ignore_ascii_case(element) && ends_name {
            let lower = rest.to_ascii_lowercase();
            let end = lower.find(&format!("</{element}"))?;
            let after = rest[end..].find('>').map_or(rest.len(), |i| end + i + 1);
            return Some(&rest[after..]);
        }
    }
    None
}

/// The name of the tag `inside` (what is between `<` and `>`), lowercased;
/// empty for a closing tag, a declaration or a self-closing one.
fn tag_name(inside: &str) -> String {
    if inside.starts_with(['/', '!', '?']) || inside.ends_with('/') {
        return String::new();
    }
    inside
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// `text` with blanks collapsed to single spaces, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` with character references decoded: the named ones an error page
/// writes (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;`) and
/// numeric ones; any other left as it is.
fn decode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find(';').filter(|&end| end <= 10);
        let decoded = end.and_then(|end| reference(&rest[1..end]));
        match (end, decoded) {
            (Some(end), Some(c)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The character of reference `name` (between `&` and `;`).
fn reference(name: &str) -> Option<char> {
    let code = match name {
        "amp" => return Some('&'),
        "lt" => return Some('<'),
        "gt" => return Some('>'),
        "quot" => return Some('"'),
        "apos" => return Some('\''),
        "nbsp" => return Some(' '),
        _ => name.strip_prefix('#')?,
    };
    let value = match code.strip_prefix(['x', 'X']) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => code.parse().ok()?,
    };
    char::from_u32(value).filter(|c| !c.is_control() || c.is_whitespace())
}

/// The page Fence 13.3.0's `error.html` renders for `status`, its reason
/// phrase `reason`, and `message` (which Fence leaves out at 500 and
/// above), as Jinja escapes it.
#[cfg(test)]
pub(super) fn fence_page(status: u16, reason: &str, message: Option<&str>) -> String {
    let message = message
        .map(|m| {
            format!(
                "<p class=\"body\">Error Message:</p>\n          \
                     <p class=\"introduction\">{m}</p>\n"
            )
        })
        .unwrap_or_default();
    format!(
        r#"<!doctype html>

<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>{status}</title>
    <link href='https://fonts.googleapis.com/css?family=Source+Sans+Pro' rel='stylesheet' type='text/css'>
  </head>

  <body>
    <main>
      <img class="error-page__logo" src="/user/static/img/logo.svg" />
      <div class="error-page">
        <div class="error-page__banner">
          <h1>Gen3 Data Commons</h1>
        </div>
        <div class="error-page__status-code">
          <div class="error-page__status-code-text">
            <h1>{status}</h1>
            <h2>{reason}</h2>
          </div>
          <img class="error-page__picture" src="/user/static/img/404.svg" />
        </div>
        <div class="error-page__information">
          <p class="body">Error Identifier:</p>
          <p class="introduction">6f1c2a7e-93b4-4d0a-8e5f-2b9c1d3e4f50</p>
          {message}
          <div>
            <p class="body">Please try again!</p>
          </div>
        </div>
      </div>
    </main>
  </body>
  <style type="text/css">

  .body {{
    font-size: 16px;
    color: #9b9b9b;
  }}
  </style>
</html>
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(body: &str) -> Option<PageSaid> {
        page_message(body.as_bytes())
    }

    #[test]
    fn a_fence_404_page_says_its_message_and_its_error_id() {
        let page = fence_page(
            404,
            "Not Found",
            Some("No indexed document found with id dg.TEST/0a1b-2c3d"),
        );
        assert_eq!(
            said(&page),
            Some(PageSaid {
                message: "No indexed document found with id dg.TEST/0a1b-2c3d".into(),
                id: Some("6f1c2a7e-93b4-4d0a-8e5f-2b9c1d3e4f50".into()),
            })
        );
    }

    #[test]
    fn a_fence_500_page_without_a_message_says_its_reason_not_its_code() {
        let page = fence_page(500, "Internal Server Error", None);
        let said = said(&page).unwrap();
        assert_eq!(said.message, "Internal Server Error");
        assert!(said.id.is_some());
    }

    #[test]
    fn escaped_text_is_decoded_and_its_blanks_collapsed() {
        let page = fence_page(
            400,
            "Bad Request",
            Some("file_name &#39;a &amp; b.bin&#39;\n   is &lt;bad&gt; &quot;x&quot;&#x21; &bogus; &"),
        );
        assert_eq!(
            said(&page).unwrap().message,
            "file_name 'a & b.bin' is <bad> \"x\"! &bogus; &"
        );
    }

    #[test]
    fn a_proxy_page_says_its_title_and_s3_its_code_and_message() {
        let nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
                     <center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n\
                     </body>\r\n</html>\r\n";
        assert_eq!(said(nginx).unwrap().message, "502 Bad Gateway");
        let s3 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code>\
                  <Message>Request has expired</Message><RequestId>1</RequestId></Error>";
        assert_eq!(
            said(s3).unwrap().message,
            "AccessDenied: Request has expired"
        );
    }

    #[test]
    fn scripts_styles_and_comments_are_not_text() {
        let page = "<html><head><script>var t = 'x<y';</script><style>h2 {}</style></head>\
                    <body><!-- <h2>hidden</h2> --><h2>Forbidden</h2></body></html>";
        assert_eq!(said(page).unwrap().message, "Forbidden");
    }

    #[test]
    fn a_body_that_is_not_markup_or_says_nothing_has_no_message() {
        for body in [
            "plain words",
            "",
            "<html><body><h1>404</h1></body></html>",
            "{\"a\": 1}",
        ] {
            assert_eq!(said(body), None, "{body}");
        }
        assert_eq!(page_message(b"<h1>\xff\xfe</h1>"), None);
    }
}

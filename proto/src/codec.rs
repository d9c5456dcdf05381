//! Line framing for the protocol, on tokio-util's `LinesCodec`.
//!
//! `LinesCodec` reports an over-long or non-UTF-8 line as an error, and a
//! `Framed` stream ends after its first error. A daemon must answer such a
//! line and keep reading the same connection, so [`JsonLines`] turns those
//! two errors into items.

use bytes::BytesMut;
use serde::Serialize;
use tokio_util::codec::{Decoder, Encoder, LinesCodec, LinesCodecError};

/// One line read off the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Longer than the limit; the rest of it up to its newline is skipped.
    TooLong,
    /// Not UTF-8.
    NotText,
}

/// Newline-delimited JSON with a maximum line length.
#[derive(Debug, Clone)]
pub struct JsonLines {
    lines: LinesCodec,
    max: usize,
}

impl JsonLines {
    pub fn new(max_line: usize) -> JsonLines {
        JsonLines {
            lines: LinesCodec::new_with_max_length(max_line),
            max: max_line,
        }
    }

    pub fn max_line(&self) -> usize {
        self.max
    }
}

impl Decoder for JsonLines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        map_line(self.lines.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        map_line(self.lines.decode_eof(buf))
    }
}

fn map_line(got: Result<Option<String>, LinesCodecError>) -> Result<Option<Line>, std::io::Error> {
    match got {
        Ok(line) => Ok(line.map(Line::Text)),
        Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
        // LinesCodec has consumed the line before finding it is not UTF-8.
        Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            Ok(Some(Line::NotText))
        }
        Err(LinesCodecError::Io(e)) => Err(e),
    }
}

impl<T: Serialize> Encoder<&T> for JsonLines {
    type Error = std::io::Error;

    fn encode(&mut self, item: &T, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        // serde_json never writes a raw newline inside a value, so one value is one line.
        let text = serde_json::to_string(item).map_err(std::io::Error::other)?;
        if text.len() > self.max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a frame of {} bytes is over the {}-byte line limit",
                    text.len(),
                    self.max
                ),
            ));
        }
        dst.reserve(text.len() + 1);
        dst.extend_from_slice(text.as_bytes());
        dst.extend_from_slice(b"\n");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_long_and_not_text_lines_become_items_and_reading_goes_on() {
        let mut codec = JsonLines::new(8);
        let mut buf = BytesMut::from(&b"0123456789abc\n\xff\xfe\n{\"a\":1}\n"[..]);
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Line::TooLong));
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Line::NotText));
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(Line::Text("{\"a\":1}".into()))
        );
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
    }

    #[test]
    fn encoding_refuses_a_frame_over_the_limit() {
        let mut codec = JsonLines::new(8);
        let mut buf = BytesMut::new();
        codec.encode(&"short", &mut buf).unwrap();
        assert_eq!(&buf[..], b"\"short\"\n");
        let err = codec.encode(&"far too long for it", &mut buf).unwrap_err();
        assert!(err.to_string().contains("line limit"), "{err}");
    }
}

//! Any bytes, cut where the first byte says: the line framing never fails
//! or holds more than the limit of an unfinished line, and each text line
//! is a request (which reads back the same) or refused.
#![no_main]

use bytes::BytesMut;
use drsd::ipc::codec::{JsonLines, Line};
use drsd::ipc::RequestFrame;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 256;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(cut).max(1);
    let mut codec = JsonLines::new(MAX);
    let mut buf = BytesMut::new();
    let mut lines = Vec::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        while let Some(line) = codec.decode(&mut buf).expect("framing never fails") {
            lines.push(line);
        }
        assert!(buf.len() <= MAX);
    }
    while let Some(line) = codec.decode_eof(&mut buf).expect("framing never fails") {
        lines.push(line);
    }
    for line in lines {
        if let Line::Text(text) = line {
            if let Ok(frame) = serde_json::from_str::<RequestFrame>(&text) {
                let again = serde_json::to_string(&frame).unwrap();
                assert_eq!(serde_json::from_str::<RequestFrame>(&again).unwrap(), frame);
            }
        }
    }
});

//! Any bytes: the pointer parser reads or refuses them without a panic, and
//! what it reads rewrites to a canonical pointer that reads back the same.
#![no_main]

use drsd::lfs::Pointer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Pointer::parse(data) {
        assert_eq!(Pointer::parse(p.to_text().as_bytes()), Ok(p));
    }
});

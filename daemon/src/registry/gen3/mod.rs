//! What the registry keeps of a Gen3 commons: the registrations with an
//! Indexd (`indexd.rs`, every engine's: a record is the lab's) and the
//! journal of uploads through Fence (`fence.rs`, always this node's own:
//! a journal in a team's database would be every member's to write, and a
//! forged step or part could make this node skip an upload it never made).

mod fence;
mod indexd;

pub use fence::{FencePart, FenceStep, FenceUpload, FenceUploads};
pub use indexd::IndexdRegistration;

pub(super) use fence::{PARTS_SCHEMA as FENCE_PARTS_SCHEMA, SCHEMA as FENCE_SCHEMA};
pub(super) use indexd::SCHEMA as INDEXD_SCHEMA;

//! The end-to-end suite, one test binary: real `drsd`, `drsctl` and
//! `drs-hook` processes, real git and git-lfs, and the shared test servers
//! (Ceph RGW for S3, nginx for HTTPS) or the in-process DRS + Indexd
//! server (`drs_server`). One binary rather than one per file
//! so the workspace links the suite once. Each module is one area seen
//! from the outside; the helpers they share are in the `drsd-e2e` library
//! (`tests/lib.rs`).

mod add_url;
mod config;
mod daemon;
mod deadlines;
mod dir_remote;
mod drs;
mod drs_access;
mod drs_server;
mod failures;
mod foreign;
mod gen3_key;
mod gen3_manifest;
mod gen3_remote;
mod gen3_server;
mod http;
mod lfs_transfer;
mod lying_server;
mod multipart;
mod pool_crash;
mod prune;
mod push_integrity;
mod quickstart;
mod recovery;
mod redirects;
mod restored_mtime;
mod s3;
mod secrets;
mod setup;
mod team;
mod team_failures;
mod team_members;
mod team_migrate;
mod team_trust;
mod team_users;

mod add_url;
mod daemon;
mod foreign;
mod http;
mod lfs_transfer;
mod pool_crash;
mod s3;
mod setup;

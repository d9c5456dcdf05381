mod add_url;
mod daemon;
mod lfs_transfer;
mod pool_crash;
mod s3;
mod setup;

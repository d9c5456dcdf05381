mod daemon;
mod pool_crash;
mod s3;
mod setup;

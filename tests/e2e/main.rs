mod pool_crash;
mod s3;

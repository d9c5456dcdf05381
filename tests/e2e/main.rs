mod pool_crash;

"""Market data: instruments, bars and ticks, import and validation, resampling, the store."""

"""Small worker programs that tests run as real processes."""

"""What the benchmark sections share: configuration, seeded data, results, the savers timed."""

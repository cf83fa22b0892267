"""Lightning callbacks that the example configs plug into the trainer."""

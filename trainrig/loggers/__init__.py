"""What a run writes and shows besides its checkpoints: the resolved config in the run's folder and in loggers that
keep one (`run_config`), images and tables from callbacks (`media`), and the model summary (`model_summary`)."""

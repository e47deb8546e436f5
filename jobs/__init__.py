"""End-to-end jobs that drive the pipeline, training and evaluation: make demo, make cpu-model."""

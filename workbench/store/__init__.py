"""The project database. The only package that imports duckdb; SQL lives nowhere else."""

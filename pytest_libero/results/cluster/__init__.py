"""Past one machine: `python -m pytest_libero submit slurm|k8s` and `status` (the command line is
pytest_libero/cluster_cli.py). `slurm`: the array and merge scripts and their submission; `status`:
each shard's Slurm state and records, and resubmission; `k8s`: the Indexed Job manifest; `jobs`:
what they share. Nothing is imported here."""

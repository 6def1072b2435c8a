"""Built-in results sinks: Weights & Biases, MLflow and TensorBoard, fed by the results hooks.

Each sink is a plain object with the two hook implementations `pytest_libero_record(record,
run_dir)` and `pytest_libero_summary(summary, run_dir)` (plugin/hookspecs.py) and `close()`; the
plugin registers the ones `--libero-sink` names on the controller (plugin/results_hook.py), and
calls each on its own, so a sink that fails is warned about once, with its `fix`, and the run
goes on. A sink imports its library only when its first record arrives (none is imported on
configure), and writes nothing into the run folder: the run's evidence is the run's alone.

What every sink logs is decided once, in common.py: per episode `episode_metrics` (success, the
counters, the first-success control, goal progress when the record has it), at the end
`summary_metrics` (both success rates with their 95% Wilson limits, overall and per suite and
task) and `run_params` (run identity, protocol identity and settings, policy) as the tracker's
config or params. registry.py names them (what --libero-sink takes). This package's own module
imports nothing, so that its modules import each other without a cycle.
"""

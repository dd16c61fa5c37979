#!/usr/bin/env bash
# A sweep cut into N shards on a Slurm cluster without Ray: one array task per shard
# (`--shard $SLURM_ARRAY_TASK_ID/N`), then one job that joins their reports with `merge`.
#
#   jid=$(sbatch --parsable --array=1-8 scripts/slurm_sweep.sh opbench --ctx cpu -w 25 -r 100)
#   sbatch --dependency=afterok:$jid scripts/slurm_sweep.sh merge opbench 8
#
#   # rnnbench: the subcommand follows the suite; a GPU per shard instead of a whole node
#   jid=$(sbatch --parsable --array=1-4 --gres=gpu:1 --no-exclusive scripts/slurm_sweep.sh rnnbench bench --device cuda)
#   sbatch --dependency=afterok:$jid scripts/slurm_sweep.sh merge rnnbench 4
#
# Each task writes $SWEEP_DIR/<suite>-<K>-of-<N>.json (default SWEEP_DIR=reports/slurm) and
# continues from its checkpoint when Slurm requeues it; the merge writes
# $SWEEP_DIR/<suite>.json, refusing missing or overlapping shards (merge's own checks).
# The array must start at 1 (shards are 1-based). VENV (default .venv) holds the suite, set
# up on the shared file system with scripts/setup.
#SBATCH --job-name=bench-sweep
#SBATCH --exclusive
#SBATCH --output=slurm-%x-%A_%a.log
set -euo pipefail
root="${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root"
bin="${VENV:-$root/.venv}/bin"
out="${SWEEP_DIR:-reports/slurm}"
mkdir -p "$out"

if [ "${1:-}" = merge ]; then
  suite="${2:?usage: slurm_sweep.sh merge SUITE N}"
  count="${3:?usage: slurm_sweep.sh merge SUITE N}"
  shards=()
  for k in $(seq 1 "$count"); do shards+=("$out/$suite-$k-of-$count.json"); done
  exec "$bin/$suite" merge "${shards[@]}" -o "$out/$suite.json" --overwrite
fi

suite="${1:?usage: slurm_sweep.sh SUITE [sweep flags...] (as an array task), or slurm_sweep.sh merge SUITE N}"
shift
: "${SLURM_ARRAY_TASK_ID:?run this as a Slurm array task: sbatch --array=1-N $0 $suite ...}"
count="${SLURM_ARRAY_TASK_COUNT:?SLURM_ARRAY_TASK_COUNT is not set; submit with sbatch --array=1-N}"
report="$out/$suite-$SLURM_ARRAY_TASK_ID-of-$count.json"
resume=()
[ -e "$report.checkpoint.jsonl" ] && resume=(--resume)  # a requeued task continues where it stopped
exec "$bin/$suite" "$@" --shard "$SLURM_ARRAY_TASK_ID/$count" --output-file "$report" --overwrite "${resume[@]}"

#!/bin/bash
# built-in kernels run as programs: recorded, their replay's signature checked (issue 28 benchmark row)
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=experiments/results/kernels-builtins.txt
W=/dev/shm/iobo-kernels-bench/builtins; rm -rf $W; mkdir -p $W
{
echo "# built-in kernels run as programs under iobo record, their replay checked (iobo check --configs 1 --repeats 1), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
for k in "vpic --particles 262144 --steps 4" "checkpoint" "vorpal" "gcrm" "ior" "tile"; do
  name=${k%% *}
  mkdir -p $W/$name/out
  echo; echo "## $name: python -m iobo.kernels.$k --out <dir>"
  (cd $W/$name && $ROOT/.venv/bin/iobo record --ranks 2 --out $W/$name.trace.json -- $ROOT/.venv/bin/python -m iobo.kernels.$k --out $W/$name/out 2>&1 | grep -E "^trace|events|I/O|folded" | head -5)
  $ROOT/.venv/bin/iobo check --trace $W/$name.trace.json --configs 1 --repeats 1 2>/dev/null | grep -v "requests >=" | grep -E "bytes|calls|files|dataset|share|transfers|PASS|FAIL"
done
} > $OUT 2>&1


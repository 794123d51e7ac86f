#!/bin/sh
# mpi_kill.sh DIR GRADCOMP -- run `theory trajectory --transport mpi` with
# P = 2 (3 ranks) in DIR, kill worker rank 2 once the CSV has rows, wait
# up to 30 s for the job to stop (timeout 90 bounds it if the kill
# misses), then print rc=<exit status> and the job's output.
# test_transport.c checks what it prints and the CSV.
dir=$1
gradcomp=$2
. "$(dirname "$0")/mpi_faults.sh"
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
(timeout 90 mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS=detect_leaks=0 -n 3 "$gradcomp" theory trajectory \
   --problem quadratic:P=2,d=24 --algorithm bi --compressor topk --k 3 \
   --lr 0.01 --steps 50000000 --csv "$dir/k.csv" --transport mpi \
   > out 2>&1; echo $? > rc) &
i=0
while [ $i -lt 600 ] && [ "$(cat k.csv 2>/dev/null | wc -l)" -lt 5 ]; do
  sleep 0.1; i=$((i + 1))
done
kill_rank "$dir/k.csv" 2
wait_for_status rc
echo "rc=$(cat rc 2>/dev/null)"
cat out

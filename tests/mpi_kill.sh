#!/bin/sh
# mpi_kill.sh DIR GRADCOMP [STOP] -- run `theory trajectory --transport
# mpi` with P = 2 (3 ranks) in DIR, kill worker rank 2 once the CSV has
# rows, wait up to 30 s for the job to stop (timeout 90 bounds it if the
# kill misses), then print rc=<exit status> and the job's output.  With
# STOP the rank is stopped (SIGSTOP: alive, silent) instead, the run has
# --mpi-timeout 8 and only its watchdog can end it: up to 120 s (timeout
# 200), stop_s=<seconds from the SIGSTOP to the job's end> printed too,
# and wait_cpu_pct=<the most CPU, in percent of one core, rank 0 or 1
# used from 1 to 4 s after the SIGSTOP, waiting on rank 2>.
# test_transport.c checks what it prints and the CSV.
dir=$1
gradcomp=$2
sig=${3:-KILL}
. "$(dirname "$0")/mpi_faults.sh"
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
wd= bound=90 tenths=300
[ "$sig" = STOP ] && wd="--mpi-timeout 8" bound=200 tenths=1200
(timeout $bound mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS=detect_leaks=0 -n 3 "$gradcomp" theory trajectory \
   --problem quadratic:P=2,d=24 --algorithm bi --compressor topk --k 3 \
   --lr 0.01 --steps 50000000 --csv "$dir/k.csv" --transport mpi $wd \
   > out 2>&1; echo $? > rc) &
i=0
while [ $i -lt 600 ] && [ "$(cat k.csv 2>/dev/null | wc -l)" -lt 5 ]; do
  sleep 0.1; i=$((i + 1))
done
signal_rank "$sig" "$dir/k.csv" 2
t0=$(date +%s)
if [ "$sig" = STOP ]; then
  sleep 1
  a0=$(rank_ticks "$dir/k.csv" 0) a1=$(rank_ticks "$dir/k.csv" 1)
  sleep 3
  b0=$(rank_ticks "$dir/k.csv" 0) b1=$(rank_ticks "$dir/k.csv" 1)
  hz=$(getconf CLK_TCK)
  echo "wait_cpu_pct=$(( ( (b0 - a0) > (b1 - a1) ? (b0 - a0) : (b1 - a1) ) * 100 / (3 * hz) ))"
fi
wait_for_status rc $tenths
echo "stop_s=$(($(date +%s) - t0))"
echo "rc=$(cat rc 2>/dev/null)"
if [ "$sig" = STOP ]; then   # a job the watchdog missed: end what is left
  for r in 0 1 2; do
    signal_rank CONT "$dir/k.csv" $r
    signal_rank KILL "$dir/k.csv" $r
  done
fi
wait
cat out

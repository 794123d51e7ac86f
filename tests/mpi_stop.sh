#!/bin/sh
# mpi_stop.sh DIR GRADCOMP DATA RANK -- the MPI watchdog: `gradcomp train
# --transport mpi --mpi-timeout 5` with P = 2 (3 ranks) in DIR: an
# uninterrupted in-process reference run (DIR/ref), then the same run
# under mpirun (DIR/run) with rank RANK stopped (SIGSTOP: alive, silent)
# once two epochs are logged.  Nothing but the watchdog ends that job:
# wait up to 240 s for it (timeout 300 bounds it if the watchdog fails),
# then print rc=<exit status>, stop_s=<seconds from the SIGSTOP to the
# job's end>, rows_at_stop=<log rows then>, the job's output and every
# rank's stop record; continue and kill what is left of a job that did
# not end; resume the run with --resume under mpirun and print
# resume_rc=<its exit status>.  test_transport.c checks what it prints,
# the log rows and the final model bytes.
dir=$1
gradcomp=$2
data=$3
victim=$4
. "$(dirname "$0")/mpi_faults.sh"
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
mpirun="mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS=detect_leaks=0 -n 3"
run="train --data $data --workers 2 --algorithm bi --density 0.01 --lr 0.05
     --train-subset 2000 --test-subset 100 --epochs 12 --seed 11 --quiet"
"$gradcomp" $run --out "$dir/ref" > ref.out 2>&1 || { echo "reference failed"; cat ref.out; exit 1; }
(timeout 300 $mpirun "$gradcomp" $run --out "$dir/run" --transport mpi \
   --mpi-timeout 5 > out 2>&1; echo $? > rc) &
i=0
while [ $i -lt 1200 ] && [ "$(cat run/log.csv 2>/dev/null | wc -l)" -lt 3 ]; do
  sleep 0.05; i=$((i + 1))
done
signal_rank STOP "$dir/run" "$victim"
t0=$(date +%s)
echo "rows_at_stop=$(($(wc -l < run/log.csv) - 1))"
cp run/log.csv log-at-stop.csv
wait_for_status rc 2400
echo "stop_s=$(($(date +%s) - t0))"
echo "rc=$(cat rc 2>/dev/null)"
for r in 0 1 2; do
  signal_rank CONT "$dir/run" $r
  signal_rank KILL "$dir/run" $r
done
wait
cat out
for f in run/stopped*.txt; do
  [ -f "$f" ] && echo "stop_file ${f#run/}: $(cat "$f")"
done
timeout 200 $mpirun "$gradcomp" $run --out "$dir/run" --transport mpi --resume \
  > resume.out 2>&1
echo "resume_rc=$?"
cat resume.out
ls run/stopped* 2>/dev/null | sed 's/^/left: /'

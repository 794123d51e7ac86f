#!/bin/sh
# mpi_train_kill.sh DIR GRADCOMP DATA [RANK] -- `gradcomp train
# --transport mpi` with P = 2 (3 ranks) in DIR: an uninterrupted
# in-process reference run (DIR/ref), then the same run under mpirun
# (DIR/run) with rank RANK (default 2, a worker) killed (SIGKILL) once two
# epochs are logged; wait up to 30 s for the job to stop (timeout 90
# bounds it if the kill misses), then print rc=<exit status>, the job's
# output and every rank's stop record as "stop_file NAME: TEXT"
# (run/stopped.txt of rank 0, stopped-rR.txt of worker rank R, written at
# mpirun's SIGCONT, a second before its SIGTERM, which SIGKILL can follow
# before a rank's line reaches the output), resume the run with --resume
# under mpirun and print resume_rc=<its exit status>.  test_transport.c
# checks what it prints, the log rows and the final model bytes.
dir=$1
gradcomp=$2
data=$3
victim=${4:-2}
. "$(dirname "$0")/mpi_faults.sh"
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
mpirun="mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS=detect_leaks=0 -n 3"
run="train --data $data --workers 2 --algorithm bi --density 0.01 --lr 0.05
     --train-subset 2000 --test-subset 100 --epochs 12 --seed 11 --quiet"
"$gradcomp" $run --out "$dir/ref" > ref.out 2>&1 || { echo "reference failed"; cat ref.out; exit 1; }
(timeout 90 $mpirun "$gradcomp" $run --out "$dir/run" --transport mpi \
   > out 2>&1; echo $? > rc) &
i=0
while [ $i -lt 600 ] && [ "$(cat run/log.csv 2>/dev/null | wc -l)" -lt 3 ]; do
  sleep 0.05; i=$((i + 1))
done
kill_rank "$dir/run" "$victim"
wait_for_status rc
echo "rc=$(cat rc 2>/dev/null)"
echo "rows_at_stop=$(($(wc -l < run/log.csv) - 1))"
cp run/log.csv log-at-stop.csv
cat out
for f in run/stopped*.txt; do
  [ -f "$f" ] && echo "stop_file ${f#run/}: $(cat "$f")"
done
timeout 120 $mpirun "$gradcomp" $run --out "$dir/run" --transport mpi --resume \
  > resume.out 2>&1
echo "resume_rc=$?"
cat resume.out

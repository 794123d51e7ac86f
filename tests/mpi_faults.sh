# mpi_faults.sh -- sourced by the MPI fault tests (mpi_kill.sh,
# mpi_train_kill.sh): kill one rank of a running mpirun job, and wait for
# the job's exit status.

# kill_rank PATTERN RANK: SIGKILL the processes whose command line holds
# PATTERN and whose MPI rank (OMPI_COMM_WORLD_RANK) is RANK.
kill_rank() {
  for p in $(pgrep -f "$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      kill -9 "$p"
    fi
  done
}

# wait_for_status FILE: wait up to 30 s for FILE to hold the job's exit
# status (the test then reports whether it came in time).
wait_for_status() {
  i=0
  while [ $i -lt 300 ] && [ ! -s "$1" ]; do
    sleep 0.1; i=$((i + 1))
  done
}

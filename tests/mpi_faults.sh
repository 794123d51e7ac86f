# mpi_faults.sh -- sourced by the MPI fault tests (mpi_kill.sh,
# mpi_train_kill.sh, mpi_stop.sh): signal one rank of a running mpirun
# job, and wait for the job's exit status.

# signal_rank SIGNAL PATTERN RANK: send SIGNAL to the processes whose
# command line holds PATTERN and whose MPI rank (OMPI_COMM_WORLD_RANK) is
# RANK.
signal_rank() {
  for p in $(pgrep -f "$2"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$3"; then
      kill -"$1" "$p"
    fi
  done
}

# rank_ticks PATTERN RANK: the CPU time (user + system, clock ticks) that
# rank's process has used so far.
rank_ticks() {
  for p in $(pgrep -f "$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      # fields 14 and 15 of /proc/PID/stat, counted after the ")" that
      # ends the command name
      sed 's/.*) //' /proc/$p/stat | awk '{ print $12 + $13 }'
      return
    fi
  done
  echo 0
}

# kill_rank PATTERN RANK: SIGKILL that rank.
kill_rank() {
  signal_rank KILL "$1" "$2"
}

# wait_for_status FILE [TENTHS]: wait up to TENTHS tenths of a second (300:
# 30 s) for FILE to hold the job's exit status (the test then reports
# whether it came in time).
wait_for_status() {
  i=0
  while [ $i -lt "${2:-300}" ] && [ ! -s "$1" ]; do
    sleep 0.1; i=$((i + 1))
  done
}

/* ce_cli.c -- the front end's CLI helpers (experiments/cli.c) for the
 * counterexample programs: same parsing rules and messages everywhere. */
#include "../experiments/cli.c"

/* problem.c -- placeholder until the theory module lands. */
#include "gc_theory.h"
int gc__theory_placeholder;

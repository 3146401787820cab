/*
** alloc_fail.c -- rel-alloc: perfmon under allocation failure, for every N.
**
**   rel-alloc ROOT [-v]
**
** Runs tests/alloc_workload.lua ("work": require perfmon, load a plugin,
** monitor it through events, a nested loop, a blocking call, coroutines,
** errors and snapshots) once to count the allocations it makes, W (about
** 1,100, most of them Lua compiling perfmon's modules).  Then, for every N
** from 1 to W + 20, in a fresh lua_State each time, runs it again with the
** Nth allocation failing, in two modes:
**   once    only the Nth allocation fails.  Lua answers its own failures
**           with an emergency collection and a retry, so this mostly drives
**           collections into the middle of perfmon's work; perfmon's own
**           allocations are not retried and fail for real.
**   sticky  the Nth and every later allocation fail: the run ends in a
**           memory error, wherever N put it.
** After each run, with allocations succeeding again, the workload's
** "check" phase must pass (perfmon loads, its monitor count matches the
** monitor objects still open, the hook is set exactly when a monitor is,
** a new plugin is measured exactly, the snapshots kept are monotonic and
** bounded by the process), then lua_close must give back every byte.  The
** error of a failed run must be a memory error: perfmon must not turn a
** failed allocation into some other complaint.
**
** Exits 0 and prints "rel-alloc: ok" when every run passed.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "driver.h"

#define WORKLOAD "tests/alloc_workload.lua"
#define MARGIN 20 /* runs past W: nothing fails (W varies run to run) */
#define RUN_SECONDS 20 /* a run that takes longer hangs: SIGALRM ends it */

static const char *root;
static int verbose;

typedef struct Tally {
  long runs, failed_runs, failures;
  long problems; /* runs that broke a rule: the test fails */
} Tally;

/* Problems are told apart by kind and the first line of their message;
** each distinct one is printed once, with the first run that met it. */
#define DISTINCT 64

static struct {
  char sig[160];
  long count;
} seen[DISTINCT];
static int nseen;

static void problem (Tally *t, const char *what, const char *kind,
                     const char *msg) {
  char sig[160];
  size_t len;
  int i;
  t->problems++;
  snprintf(sig, sizeof(sig), "%s: %s", kind, msg ? msg : "(no message)");
  len = strcspn(sig, "\n");
  sig[len] = '\0';
  for (i = 0; i < nseen; i++)
    if (strcmp(seen[i].sig, sig) == 0) {
      seen[i].count++;
      return;
    }
  if (nseen < DISTINCT) {
    strcpy(seen[nseen].sig, sig);
    seen[nseen++].count = 1;
  }
  fprintf(stderr, "rel-alloc: %s: %s: %s\n", what, kind,
          msg ? msg : "(no message)");
}

static void summary (void) {
  int i;
  for (i = 0; i < nseen; i++)
    fprintf(stderr, "rel-alloc: %ld runs: %s\n", seen[i].count, seen[i].sig);
}

/* The error of a run that failed: "not enough memory", or a message that
** says memory ran out (luaL_traceback appends the stack to it). */
static int is_memory_error (int status, const char *msg) {
  if (status == LUA_ERRMEM || status == LUA_ERRERR)
    return 1;
  return msg != NULL && strstr(msg, "not enough memory") != NULL;
}

/* Returns whether perfmon is consistent after the run. */
static int check (lua_State *L, const char *what, Tally *t) {
  const char *args[1] = {"check"};
  if (rel_runfile(L, root, WORKLOAD, 1, args) == LUA_OK)
    return 1;
  problem(t, what, "the check after the run failed", lua_tostring(L, -1));
  lua_pop(L, 1);
  return 0;
}

/* One run with allocation n failing; returns the allocations made. */
static long run (long n, int sticky, Tally *t) {
  rel_Alloc a;
  lua_State *L = rel_newstate(&a, root);
  char what[64];
  long made;
  int status;
  snprintf(what, sizeof(what), "N=%ld (%s)", n, sticky ? "sticky" : "once");
  alarm(RUN_SECONDS);
  if (rel_loadfile(L, root, WORKLOAD) != LUA_OK)
    rel_die("%s", lua_tostring(L, -1));
  lua_pushliteral(L, "work");
  a.allocs = 0; /* what the workload itself allocates */
  a.fail_at = n;
  a.sticky = sticky;
  status = rel_pcall(L, 1);
  made = a.allocs;
  a.fail_at = 0;
  t->runs++;
  t->failures += a.failed;
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    t->failed_runs++;
    if (!is_memory_error(status, msg))
      problem(t, what, "not a memory error", msg);
    else if (verbose)
      fprintf(stderr, "rel-alloc: %s: %s\n", what, msg ? msg : "(no message)");
    lua_pop(L, 1);
  } else if (a.failed > 0 && n > 0 && sticky) {
    /* a refused allocation that nothing noticed: perfmon degraded
       silently (allowed: it stops counting, never crashes) */
    if (verbose)
      fprintf(stderr, "rel-alloc: %s: completed despite the failure\n", what);
  }
  check(L, what, t);
  if (rel_close(L, &a, what) != 0)
    problem(t, what, "leak", "bytes still allocated after lua_close");
  return made;
}

int main (int argc, char **argv) {
  Tally t = {0, 0, 0, 0};
  long w, n;
  int sticky;
  if (argc < 2)
    rel_die("usage: rel-alloc ROOT [-v]");
  root = argv[1];
  verbose = argc > 2 && strcmp(argv[2], "-v") == 0;
  w = run(0, 0, &t);
  if (t.failed_runs != 0 || t.problems != 0)
    rel_die("the workload fails with no allocation failing");
  printf("rel-alloc: the workload makes %ld allocations\n", w);
  for (sticky = 0; sticky <= 1; sticky++)
    for (n = 1; n <= w + MARGIN; n++)
      run(n, sticky, &t);
  printf("rel-alloc: %ld runs (N = 1..%ld, once and sticky), %ld ended in a "
         "memory error, %ld allocations refused\n",
         t.runs - 1, w + MARGIN, t.failed_runs, t.failures);
  if (t.problems > 0) {
    summary();
    rel_die("%ld runs broke a rule", t.problems);
  }
  printf("rel-alloc: ok\n");
  return 0;
}

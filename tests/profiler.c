/*
** profiler.c -- rel-profiler: the sampling profiler's start under
** allocation failure, and its stop from another OS thread.
**
**   rel-profiler ROOT [alloc|threads]
**
** 1. alloc: p:start() runs with the Nth allocation failing, for every N
**    (once and sticky, as rel-alloc), in a fresh lua_State each time, in
**    three setups: nothing else running; another profiler running (which
**    start forcibly stops); a monitor open (start then listens for jank
**    alerts, in Lua).  A start that failed must have failed with a memory
**    error and left nothing behind: the profiler not running, its timer
**    gone (/proc/self/timers), SIGPROF's action what it was,
**    coroutine.resume and coroutine.wrap the originals, the profiler not
**    anchored in the registry, the other profiler still running.  A start
**    that returned must have started.  Either way a later start samples,
**    and lua_close gives back every byte.
** 2. threads: a state whose profiler was started on thread A is handed to
**    thread B (under a mutex, as a host with a pool of workers does), and
**    B stops the profiler and closes the state.  Once with A waiting on a
**    condition variable: its timer is gone and SIGPROF's action is back.
**    Once with A blocking SIGPROF, a tick of the timer pending there: the
**    action must not be back to the default while that tick is pending
**    (kernels before 6.13 deliver it once A unblocks the signal, and the
**    default action ends the process); A then unblocks it and lives on.
**    Each with both timers, "precise" and "tick" (A's CPU clock).
**
** Work that needs a sample, or a tick pending, spins until there is one
** (up to 2 s of CPU), never for a fixed time: on a loaded machine, or with
** the "tick" timer, a few ms may see none.
**
** Exits 0 and prints "rel-profiler: ok" when every part passed.
*/

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "driver.h"

#define MARGIN 10 /* runs past W: nothing fails */

static const char *root;
static struct sigaction original; /* SIGPROF's action when the driver began */

/* The POSIX timers of the process that send SIGPROF, or -1 when Linux
** does not show them. */
static int sigprof_timers (void) {
  char line[256];
  int n = 0;
  FILE *f = fopen("/proc/self/timers", "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "signal: 27/", 11) == 0)
      n++;
  fclose(f);
  return n;
}

/* Whether SIGPROF's action is the one the driver began with. */
static int action_is_original (void) {
  struct sigaction now;
  sigaction(SIGPROF, NULL, &now);
  if ((now.sa_flags & SA_SIGINFO) != (original.sa_flags & SA_SIGINFO))
    return 0;
  return (now.sa_flags & SA_SIGINFO) ? now.sa_sigaction == original.sa_sigaction
                                     : now.sa_handler == original.sa_handler;
}

/* Lua: spins until p has a sample, for up to 2 s of CPU. */
#define SPIN_SAMPLED                                                           \
  "function SPIN_SAMPLED(p)\n"                                                 \
  "  for _ = 1, 2000 do SPIN(1) if #p:samples() > 0 then return end end\n"     \
  "end\n"

static void spin_ms (double ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  do
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  while ((double)(t.tv_sec - t0.tv_sec) * 1e3 +
             (double)(t.tv_nsec - t0.tv_nsec) / 1e6 <
         ms);
}

/*
** {======================================================
** 1. Allocation failure in start
** =======================================================
*/

static const char *const alloc_setup =
    "local setup = ...\n"
    "Profiler = require('perfmon.profiler')\n"
    "local perfmon = require('perfmon')\n"
    "RESUME, WRAP = coroutine.resume, coroutine.wrap\n"
    "P = Profiler.new()\n"
    "if setup == 'other' then Q = Profiler.new() Q:start(1000) end\n"
    "if setup == 'monitor' then MON = perfmon.monitor{ 'jank' } end\n"
    "BEFORE = { coroutine.resume, coroutine.wrap }\n"
    "OK, ERR, RAISED = false, false, false -- globals made: no allocation\n"
    "function WORK() OK, ERR = pcall(P.start, P, 100) end\n"
    "function SPIN(ms) local t = os.clock() + ms / 1000\n"
    "  while os.clock() < t do end end\n" SPIN_SAMPLED "function ANCHORED(u)\n"
    "  for _, v in pairs(debug.getregistry()) do\n"
    "    if rawequal(v, u) then return true end end\n"
    "  return false end\n"
    "function CHECK()\n"
    "  local running = P:is_profiling()\n"
    "  local err = tostring(RAISED or ERR)\n"
    "  if OK then assert(running, 'start returned, not running')\n"
    "  else\n"
    "    assert(not running, 'start failed, yet it runs: ' .. err)\n"
    "    assert(err:find('not enough memory'), 'not a memory error: ' .. err)\n"
    "    assert(coroutine.resume == BEFORE[1] and coroutine.wrap == "
    "BEFORE[2],\n"
    "      'start failed and changed coroutine.resume or wrap')\n"
    "    assert(not ANCHORED(P.core), 'start failed and left the profiler "
    "anchored in the registry')\n"
    "    assert(not Q or Q:is_profiling(), 'a failed start stopped the "
    "other profiler')\n"
    "    if not MON then assert(debug.gethook() == nil, 'a failed start "
    "left a hook') end\n"
    "  end\n"
    "  return (running and 1 or 0) + (Q and Q:is_profiling() and 1 or 0)\n"
    "end\n"
    "function AGAIN()\n"
    "  if P:is_profiling() then P:stop() end\n"
    "  if Q and Q:is_profiling() then Q:stop() end\n"
    "  P:reset()\n"
    "  P:start(100) SPIN_SAMPLED(P) P:stop()\n"
    "  assert(#P:samples() > 0, 'a later start took no sample')\n"
    "  assert(coroutine.resume == RESUME and coroutine.wrap == WRAP)\n"
    "  if MON then MON:close() MON = nil end\n"
    "end\n";

typedef struct Tally {
  long runs, failed, problems;
} Tally;

static void problem (Tally *t, const char *what, const char *msg) {
  t->problems++;
  if (t->problems <= 20)
    fprintf(stderr, "rel-profiler: %s: %s\n", what, msg ? msg : "?");
}

/* Calls global fn with allocations as a says; returns the status and, in
** *running, CHECK's count of profilers running. */
static int call (lua_State *L, const char *fn, int *running) {
  int status;
  lua_getglobal(L, fn);
  status = lua_pcall(L, 0, running ? 1 : 0, 0);
  if (status == LUA_OK && running != NULL) {
    *running = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  return status;
}

/* One run with allocation n failing (0: none); returns the allocations
** WORK made. */
static long alloc_run (const char *setup, long n, int sticky, Tally *t) {
  rel_Alloc a;
  lua_State *L = rel_newstate(&a, root);
  char what[96];
  long made;
  int status, running = 0, timers;
  snprintf(what, sizeof(what), "%s, N=%ld (%s)", setup, n,
           sticky ? "sticky" : "once");
  if (luaL_loadstring(L, alloc_setup) != LUA_OK)
    rel_die("%s", lua_tostring(L, -1));
  lua_pushstring(L, setup);
  if (rel_pcall(L, 1) != LUA_OK)
    rel_die("%s: setup: %s", what, lua_tostring(L, -1));
  lua_getglobal(L, "WORK");
  a.allocs = 0;
  a.fail_at = n;
  a.sticky = sticky;
  status = lua_pcall(L, 0, 0, 0);
  made = a.allocs;
  a.fail_at = 0;
  t->runs++;
  if (status != LUA_OK) { /* WORK itself raised: pcall could not run */
    lua_setglobal(L, "RAISED");
  }
  lua_getglobal(L, "OK");
  t->failed += !lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (call(L, "CHECK", &running) != LUA_OK) {
    problem(t, what, lua_tostring(L, -1));
    lua_pop(L, 1);
  } else {
    timers = sigprof_timers();
    if (timers >= 0 && timers != running)
      problem(t, what, "the timers do not match the profilers running");
    if (action_is_original() != (running == 0))
      problem(t, what,
              "SIGPROF's action does not match the profilers "
              "running");
  }
  if (call(L, "AGAIN", NULL) != LUA_OK) {
    problem(t, what, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  if (sigprof_timers() > 0 || !action_is_original())
    problem(t, what, "a timer or the handler is left after stop");
  if (rel_close(L, &a, what) != 0)
    problem(t, what, "bytes still allocated after lua_close");
  return made;
}

static int alloc_part (void) {
  static const char *const setups[] = {"alone", "other", "monitor"};
  Tally t = {0, 0, 0};
  int i, sticky;
  for (i = 0; i < 3; i++) {
    long failed = t.failed, problems = t.problems, n;
    long w = alloc_run(setups[i], 0, 0, &t);
    if (t.failed != failed || t.problems != problems)
      rel_die("%s: start fails with no allocation failing", setups[i]);
    for (sticky = 0; sticky <= 1; sticky++)
      for (n = 1; n <= w + MARGIN; n++)
        alloc_run(setups[i], n, sticky, &t);
    printf("rel-profiler: %s: start makes %ld allocations\n", setups[i], w);
  }
  printf("rel-profiler: alloc: %ld runs, %ld failed starts, %ld problems\n",
         t.runs, t.failed, t.problems);
  if (t.failed == 0)
    fprintf(stderr, "rel-profiler: no start ever failed: nothing tested\n");
  return t.problems == 0 && t.failed > 0;
}

/* }====================================================== */

/*
** {======================================================
** 2. Stop on another thread
** =======================================================
*/

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int turn; /* 0: A runs; 1: B runs; 2: done */
  int block; /* A blocks SIGPROF while B stops */
  const char *timer; /* p:start's option */
  lua_State *L;
  rel_Alloc a;
  int ok;
} hand = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          0,
          0,
          "precise",
          NULL,
          {0, 0, 0, 0, 0},
          1};

static void fail (const char *msg) {
  fprintf(stderr, "rel-profiler: threads (%s, timer %s): %s\n",
          hand.block ? "A blocks SIGPROF" : "A waits", hand.timer, msg);
  hand.ok = 0;
}

static void run (const char *src) {
  if (rel_run(hand.L, "=threads", src) != LUA_OK) {
    fail(lua_tostring(hand.L, -1));
    lua_pop(hand.L, 1);
  }
}

static void pass_turn (int to) {
  pthread_mutex_lock(&hand.mu);
  hand.turn = to;
  pthread_cond_broadcast(&hand.cv);
  pthread_mutex_unlock(&hand.mu);
}

static void wait_turn (int turn) {
  pthread_mutex_lock(&hand.mu);
  while (hand.turn != turn)
    pthread_cond_wait(&hand.cv, &hand.mu);
  pthread_mutex_unlock(&hand.mu);
}

static void *thread_a (void *arg) {
  sigset_t set, pending;
  (void)arg;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  run("P:start(100, nil, { timer = TIMER }) SPIN_SAMPLED(P)");
  if (hand.block) { /* until a tick of the timer is pending here */
    int i;
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    for (i = 0; i < 2000; i++) {
      spin_ms(1);
      sigpending(&pending);
      if (sigismember(&pending, SIGPROF))
        break;
    }
    if (i == 2000)
      fail("no tick of the timer came in 2 s of CPU");
  }
  pass_turn(1);
  wait_turn(2);
  sigpending(&pending);
  if (sigismember(&pending, SIGPROF) && action_is_original())
    fail("SIGPROF's default action is back while a tick of the deleted "
         "timer is pending on the thread it signals");
  pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* takes it */
  spin_ms(20); /* and lives on */
  return NULL;
}

static void *thread_b (void *arg) {
  (void)arg;
  wait_turn(1);
  run("SPIN(10) P:stop()\n"
      "assert(#P:samples() > 0, 'no sample')\n"
      "assert(not P:is_profiling())\n"
      "assert(coroutine.resume == RESUME and coroutine.wrap == WRAP)\n"
      "assert(debug.gethook() == nil, 'a hook is left')");
  if (sigprof_timers() > 0)
    fail("the timer is left after stop");
  if (!hand.block && !action_is_original())
    fail("SIGPROF's action is not restored (nothing was pending)");
  if (rel_close(hand.L, &hand.a, "threads") != 0)
    fail("bytes still allocated after lua_close");
  hand.L = NULL;
  pass_turn(2);
  return NULL;
}

static int threads_part (int block, const char *timer) {
  pthread_t a, b;
  hand.block = block;
  hand.timer = timer;
  hand.turn = 0;
  hand.ok = 1;
  hand.L = rel_newstate(&hand.a, root);
  lua_pushstring(hand.L, timer);
  lua_setglobal(hand.L, "TIMER");
  if (rel_run(hand.L, "=setup",
              "Profiler = require('perfmon.profiler')\n"
              "RESUME, WRAP = coroutine.resume, coroutine.wrap\n"
              "P = Profiler.new()\n"
              "function SPIN(ms) local t = os.clock() + ms / 1000\n"
              "  while os.clock() < t do end end\n" SPIN_SAMPLED) != LUA_OK)
    rel_die("threads: setup: %s", lua_tostring(hand.L, -1));
  pthread_create(&a, NULL, thread_a, NULL);
  pthread_create(&b, NULL, thread_b, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("rel-threads: stop on another thread, %s, timer %s: %s\n",
         block ? "the starting thread blocks SIGPROF"
               : "the starting thread waits",
         timer, hand.ok ? "ok" : "FAILED");
  return hand.ok;
}

/* }====================================================== */

int main (int argc, char **argv) {
  const char *part = argc > 2 ? argv[2] : "all";
  int ok = 1, all = strcmp(part, "all") == 0;
  if (argc < 2)
    rel_die("usage: rel-profiler ROOT [alloc|threads]");
  root = argv[1];
  sigaction(SIGPROF, NULL, &original);
  if (!all && strcmp(part, "alloc") != 0 && strcmp(part, "threads") != 0)
    rel_die("unknown part %s", part);
  if (all || strcmp(part, "alloc") == 0)
    ok = alloc_part() && ok;
  if (all || strcmp(part, "threads") == 0) {
    ok = threads_part(0, "precise") && ok;
    ok = threads_part(0, "tick") && ok;
    /* last: the handler may stay for good */
    ok = threads_part(1, "precise") && ok;
    ok = threads_part(1, "tick") && ok;
  }
  if (!ok)
    rel_die("failed");
  printf("rel-profiler: ok\n");
  return 0;
}

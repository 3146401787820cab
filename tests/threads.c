/*
** threads.c -- rel-threads: lua_States on POSIX threads.
**
**   rel-threads ROOT [THREADS [STEPS]]
**
** 1. Independent states: THREADS threads (default 4), started together,
**    each make their own lua_State, load perfmon and run the API fuzzer
**    (spec/support/fuzz.lua) for STEPS steps (default 300) with a seed of
**    their own, then close the state; every byte must go back.  Nothing is
**    shared between the states, so whatever perfmon shares between them
**    (its start-up probes of the CPU, the thread-local cache of the hook
**    and the epoch that invalidates it) is what ThreadSanitizer watches in
**    the tsan.threads build.
** 2. One state handed from thread to thread (under a mutex, as a host with
**    a pool of workers does): a plugin's coroutine is resumed from C on one
**    thread and yields; host code then runs on another thread.  The
**    plugin must not be charged for the host code, exactly as when it all
**    runs on one thread (checked first, as the control).
**
** Exits 0 and prints "rel-threads: ok" when both parts passed.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "driver.h"

static const char *root;
static int steps = 300;

/*
** {======================================================
** 1. Independent states
** =======================================================
*/

static pthread_barrier_t start_line;

typedef struct Worker {
  pthread_t id;
  int seed;
  int failed;
  char msg[2048];
} Worker;

static const char *const fuzz_src =
    "local seed, steps = ...\n"
    "local fuzz = require('spec.support.fuzz')\n"
    "local r = fuzz.run{ seed = tonumber(seed), steps = tonumber(steps),\n"
    "                    sethook = false } -- spec/sethook_spec.lua's part\n"
    "assert(r.steps == tonumber(steps))\n";

static void *worker (void *arg) {
  Worker *w = arg;
  rel_Alloc a;
  lua_State *L;
  char seed[16], nsteps[16];
  pthread_barrier_wait(&start_line);
  L = rel_newstate(&a, root);
  snprintf(seed, sizeof(seed), "%d", w->seed);
  snprintf(nsteps, sizeof(nsteps), "%d", steps);
  if (luaL_loadstring(L, fuzz_src) != LUA_OK) {
    snprintf(w->msg, sizeof(w->msg), "%s", lua_tostring(L, -1));
    w->failed = 1;
  } else {
    lua_pushstring(L, seed);
    lua_pushstring(L, nsteps);
    if (rel_pcall(L, 2) != LUA_OK) {
      snprintf(w->msg, sizeof(w->msg), "%s", lua_tostring(L, -1));
      w->failed = 1;
    }
  }
  if (rel_close(L, &a, "worker") != 0) {
    snprintf(w->msg, sizeof(w->msg), "bytes left after lua_close");
    w->failed = 1;
  }
  return NULL;
}

static int independent (int nthreads) {
  Worker *ws = calloc((size_t)nthreads, sizeof(Worker));
  int i, failed = 0;
  if (ws == NULL)
    rel_die("out of memory");
  pthread_barrier_init(&start_line, NULL, (unsigned)nthreads);
  for (i = 0; i < nthreads; i++) {
    ws[i].seed = 1000 + i;
    if (pthread_create(&ws[i].id, NULL, worker, &ws[i]) != 0)
      rel_die("pthread_create failed");
  }
  for (i = 0; i < nthreads; i++) {
    pthread_join(ws[i].id, NULL);
    if (ws[i].failed) {
      fprintf(stderr, "rel-threads: thread %d (seed %d): %s\n", i, ws[i].seed,
              ws[i].msg);
      failed++;
    }
  }
  pthread_barrier_destroy(&start_line);
  free(ws);
  printf("rel-threads: %d states on %d threads, %d fuzz steps each: %s\n",
         nthreads, nthreads, steps, failed ? "FAILED" : "ok");
  return failed == 0;
}

/* }====================================================== */

/*
** {======================================================
** 2. One state handed between threads
** =======================================================
*/

#define NTASKS 4

/* The state, its coroutine, and whose turn it is. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int turn; /* the task to run next; NTASKS: all done */
  lua_State *L, *co;
} hand = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, NULL};

static const char *const handoff_setup =
    "perfmon = require('perfmon')\n"
    "local g = perfmon.group{ name = 'p', kind = 'plugin' }\n"
    "PLUGIN = g.id\n"
    "local env = setmetatable({}, { __index = _G })\n"
    "BODY = perfmon.load('while true do coroutine.yield(1) end', '=p', env, "
    "g)\n"
    "MON = perfmon.monitor{ 'jank', 'ticks' }\n"
    "function SPIN(ms)\n"
    "  local t = os.clock() + ms / 1000\n"
    "  while os.clock() < t do end\n"
    "end\n"
    "function BEFORE() SNAP = MON:snapshot() end\n"
    "function CHARGED()\n"
    "  local d = MON:snapshot():subtract(SNAP)\n"
    "  return d.groups[PLUGIN].cpu_us, d.process.cpu_us\n"
    "end\n";

static void call_global (lua_State *L, const char *name, int arg, int nres) {
  lua_getglobal(L, name);
  if (arg >= 0)
    lua_pushinteger(L, arg);
  if (lua_pcall(L, arg >= 0 ? 1 : 0, nres, 0) != LUA_OK)
    rel_die("%s: %s", name, lua_tostring(L, -1));
}

/* The tasks, in order; each runs on the thread task_thread[] names. */
static void task (int i) {
  lua_State *L = hand.L;
  int nres;
  switch (i) {
    case 0: call_global(L, "SPIN", 1, 0); break; /* host code: the cache */
    case 1: call_global(L, "BEFORE", -1, 0); break;
    case 2: /* the plugin runs in its coroutine, resumed from C, and yields:
               no hook event follows in the main thread */
      if (lua_resume(hand.co, L, 0, &nres) != LUA_YIELD)
        rel_die("the plugin's coroutine did not yield");
      lua_pop(hand.co, nres);
      break;
    case 3: call_global(L, "SPIN", 60, 0); break; /* host code: 60 ms */
    default: break;
  }
}

static const int on_thread_b[] = {1, 1, 0, 1}; /* task i: B (1) or A (0) */

static void *hand_worker (void *arg) {
  int me = *(int *)arg, i;
  pthread_mutex_lock(&hand.mu);
  for (;;) {
    while (hand.turn < NTASKS && on_thread_b[hand.turn] != me)
      pthread_cond_wait(&hand.cv, &hand.mu);
    if (hand.turn >= NTASKS)
      break;
    i = hand.turn;
    task(i); /* the state is ours: the mutex is held */
    hand.turn++;
    pthread_cond_broadcast(&hand.cv);
  }
  pthread_mutex_unlock(&hand.mu);
  return NULL;
}

/* Runs the tasks on two threads (handed) or all on this one; returns the
** plugin's cpu_us over the 60 ms of host code. */
static double handoff_run (int threads, double *process_us) {
  rel_Alloc a;
  lua_State *L = rel_newstate(&a, root);
  double plugin_us;
  int i;
  if (rel_run(L, "=handoff", handoff_setup) != LUA_OK)
    rel_die("handoff setup: %s", lua_tostring(L, -1));
  hand.L = L;
  hand.co = lua_newthread(L);
  lua_setglobal(L, "CO"); /* anchored */
  lua_getglobal(L, "BODY");
  lua_xmove(L, hand.co, 1);
  hand.turn = 0;
  if (threads) {
    pthread_t ta, tb;
    int ida = 0, idb = 1;
    pthread_create(&ta, NULL, hand_worker, &ida);
    pthread_create(&tb, NULL, hand_worker, &idb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
  } else {
    for (i = 0; i < NTASKS; i++)
      task(i);
  }
  call_global(L, "CHARGED", -1, 2);
  plugin_us = lua_tonumber(L, -2);
  *process_us = lua_tonumber(L, -1);
  lua_pop(L, 2);
  if (rel_close(L, &a, "handoff") != 0)
    rel_die("handoff: bytes left after lua_close");
  return plugin_us;
}

#define CHARGE_LIMIT_US 10000.0 /* the plugin itself runs for microseconds */

static int handoff (void) {
  double process_us, one = handoff_run(0, &process_us), two;
  int ok = 1;
  printf("rel-threads: one thread: the plugin was charged %.0f us of %.0f\n",
         one, process_us);
  if (one > CHARGE_LIMIT_US) {
    fprintf(stderr, "rel-threads: the control failed: on one thread the "
                    "plugin was charged for host code\n");
    ok = 0;
  }
  two = handoff_run(1, &process_us);
  printf("rel-threads: handed between threads: the plugin was charged %.0f "
         "us of %.0f\n",
         two, process_us);
  if (two > CHARGE_LIMIT_US) {
    fprintf(stderr,
            "rel-threads: a state handed to another thread charged the host "
            "code that ran there to a plugin coroutine suspended on the "
            "first one (more than %.0f us)\n",
            CHARGE_LIMIT_US);
    ok = 0;
  }
  return ok;
}

/* }====================================================== */

int main (int argc, char **argv) {
  int nthreads = 4, ok;
  if (argc < 2)
    rel_die("usage: rel-threads ROOT [THREADS [STEPS]]");
  root = argv[1];
  if (argc > 2)
    nthreads = atoi(argv[2]);
  if (argc > 3)
    steps = atoi(argv[3]);
  if (nthreads < 1 || steps < 1)
    rel_die("THREADS and STEPS must be positive");
  ok = independent(nthreads);
  ok = handoff() && ok;
  if (!ok)
    rel_die("failed");
  printf("rel-threads: ok\n");
  return 0;
}

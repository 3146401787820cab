/*
** noophook.c -- a call/return hook that does nothing, for bench/run.lua.
**
** require("noophook").set() installs it on the calling thread, set(co) on
** coroutine co, clear() removes it from the calling thread, isset([co])
** tells whether it is there.  Coroutines created while it is set inherit
** it from their creator (lua_newthread copies the hook), which is how the
** coroutine workloads get it: set it before they create their coroutines.
** A host whose coroutines exist already (Prosody: bench/mod_noophook.lua)
** gives it to each.  This is the floor any call/return hook pays: Lua's own
** cost of calling a C hook on every call and return, with nothing done
** inside.
**
** timer_start(us) / timer_stop() are the same floor for the sampling
** profiler: a POSIX timer sending SIGPROF to the calling thread every us
** µs, whose handler reads the thread's CPU clock and nothing else, the
** least a time-based sampler pays per tick (Linux only).
**
** cycle_read_ns(n) times n reads of the cycle counter back to back, the
** read perfmon's stopwatch makes (src/clock.h's pm_cycles, built in from
** the same source): ns a read, the floor under each change of group of an
** exact monitor.
*/
#if defined(__linux__)
#define _GNU_SOURCE /* SIGEV_THREAD_ID */
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

#include <lua.h>
#include <lauxlib.h>

#include "clock.h"

static void noop (lua_State *L, lua_Debug *ar) {
  (void)L;
  (void)ar;
}

/* The coroutine argument 1 names, the calling thread without one. */
static lua_State *thread_arg (lua_State *L) {
  lua_State *co = lua_isnoneornil(L, 1) ? L : lua_tothread(L, 1);
  luaL_argexpected(L, co != NULL, 1, "coroutine");
  return co;
}

static int l_set (lua_State *L) {
  lua_sethook(thread_arg(L), noop, LUA_MASKCALL | LUA_MASKRET, 0);
  return 0;
}

static int l_clear (lua_State *L) {
  lua_sethook(L, NULL, 0, 0);
  return 0;
}

/* Whether the thread (the calling one without an argument) has this
** hook. */
static int l_isset (lua_State *L) {
  lua_pushboolean(L, lua_gethook(thread_arg(L)) == noop);
  return 1;
}

static int l_cycle_read_ns (lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1), i;
  uint64_t sum = 0;
  uint32_t cpu;
  double t0;
  luaL_argcheck(L, n > 0, 1, "a positive count expected");
  pm_clock_init();
  t0 = pm_wall_us();
  for (i = 0; i < n; i++)
    sum += pm_cycles(&cpu);
  lua_pushnumber(L, (pm_wall_us() - t0) * 1000.0 / (double)n);
  lua_pushboolean(L, sum != 0); /* the reads are used: none is dropped */
  return 2;
}

#if defined(__linux__) && defined(SIGEV_THREAD_ID)
static timer_t timer;
static int timing;

static void tick (int sig, siginfo_t *si, void *uc) {
  struct timespec ts;
  (void)sig;
  (void)si;
  (void)uc;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
}

static int l_timer_start (lua_State *L) {
  lua_Integer us = luaL_checkinteger(L, 1);
  struct sigaction sa;
  struct sigevent ev;
  struct itimerspec it;
  luaL_argcheck(L, us > 0 && us < 1000000, 1, "1 .. 999999 µs expected");
  luaL_argcheck(L, !timing, 1, "the timer already runs");
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = tick;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  memset(&ev, 0, sizeof(ev));
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
    return luaL_error(L, "timer_create failed");
  it.it_interval.tv_sec = it.it_value.tv_sec = 0;
  it.it_interval.tv_nsec = it.it_value.tv_nsec = (long)us * 1000;
  timer_settime(timer, 0, &it, NULL);
  timing = 1;
  return 0;
}

static int l_timer_stop (lua_State *L) {
  (void)L;
  if (timing) {
    timer_delete(timer);
    timing = 0;
  }
  return 0;
}
#endif

static const luaL_Reg funcs[] = {{"set", l_set},
                                 {"clear", l_clear},
                                 {"isset", l_isset},
                                 {"cycle_read_ns", l_cycle_read_ns},
#if defined(__linux__) && defined(SIGEV_THREAD_ID)
                                 {"timer_start", l_timer_start},
                                 {"timer_stop", l_timer_stop},
#endif
                                 {NULL, NULL}};

LUAMOD_API int luaopen_noophook (lua_State *L) {
  luaL_newlib(L, funcs);
  lua_pushliteral(L, LUA_RELEASE); /* the headers it was built against */
  lua_setfield(L, -2, "release");
  return 1;
}
